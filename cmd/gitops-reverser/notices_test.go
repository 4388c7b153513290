package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestNotices(t *testing.T) {
	newRequest := func() *v1alpha1.CommitRequest { return &v1alpha1.CommitRequest{} }
	received := func(ch <-chan event.TypedGenericEvent[*v1alpha1.CommitRequest], n int) map[string]int {
		got := map[string]int{}
		for range n {
			select {
			case e := <-ch:
				got[e.Object.GetNamespace()+"/"+e.Object.GetName()]++
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d of %d notices arrived", len(got), n)
			}
		}
		return got
	}
	t.Run("hands on every notice of a burst that fills the channel, without blocking the writer", func(t *testing.T) {
		ch := make(chan event.TypedGenericEvent[*v1alpha1.CommitRequest], 2)
		notify := notifier(t.Context(), ch, newRequest)
		want := map[string]int{}
		for i := range 10 {
			notify(types.NamespacedName{Namespace: "ops", Name: fmt.Sprintf("r%d", i)}) // returns at once though nobody reads
			want[fmt.Sprintf("ops/r%d", i)] = 1
		}
		assert.Equal(t, want, received(ch, 10))
		select {
		case e := <-ch:
			t.Fatalf("an extra notice for %s", e.Object.GetName())
		case <-time.After(100 * time.Millisecond):
		}
	})
	t.Run("hands on a notice repeated while the channel is full once", func(t *testing.T) {
		ch := make(chan event.TypedGenericEvent[*v1alpha1.CommitRequest], 1)
		notify := notifier(t.Context(), ch, newRequest)
		notify(types.NamespacedName{Namespace: "ops", Name: "first"})
		for range 5 {
			notify(types.NamespacedName{Namespace: "ops", Name: "again"})
		}
		assert.Equal(t, map[string]int{"ops/first": 1, "ops/again": 1}, received(ch, 2))
	})
	t.Run("hands a notice after a drained burst straight on", func(t *testing.T) {
		ch := make(chan event.TypedGenericEvent[*v1alpha1.CommitRequest], 1)
		n := &notices[*v1alpha1.CommitRequest]{ctx: t.Context(), ch: ch, empty: newRequest, waiting: map[types.NamespacedName]bool{}}
		n.notify(types.NamespacedName{Namespace: "ops", Name: "first"})
		n.notify(types.NamespacedName{Namespace: "ops", Name: "waits"})
		received(ch, 2)
		require.Eventually(t, func() bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return !n.pumping
		}, 10*time.Second, 10*time.Millisecond, "the pump ends once nothing waits")
		n.notify(types.NamespacedName{Namespace: "ops", Name: "later"})
		assert.Len(t, ch, 1)
	})
}
