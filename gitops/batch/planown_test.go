package batch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// movingResolver is a cluster of fixed objects in which the j-th of moving is written by
// another author (moved) as the writer reads it for the (j+1)-th time: a write the cache
// holds just before its event reaches the writer, one more in each plan of a window.
type movingResolver struct {
	objs   fixedResolver
	moving []ObjectKey
	moved  func(ObjectKey)
	mu     sync.Mutex
	reads  map[ObjectKey]int
}

func (r *movingResolver) Current(target types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	r.mu.Lock()
	r.reads[k]++
	n := r.reads[k]
	r.mu.Unlock()
	for j, m := range r.moving {
		if m == k && n == j+1 && r.moved != nil {
			r.moved(k)
		}
	}
	return r.objs.Current(target, k)
}

func TestAWindowNeverCommitsAnObjectItsLastLookSawMoveToAnotherAuthor(t *testing.T) {
	r := &movingResolver{objs: fixedResolver{}, reads: map[ObjectKey]int{}}
	var keys []ObjectKey
	for i := range replans + 1 { // one moves in each plan the window is allowed, the last one's included
		k, obj := clusterConfigMap(fmt.Sprintf("moving-%d", i), "bob's")
		r.objs[k], r.moving = obj, append(r.moving, k)
		keys = append(keys, k)
	}
	steady, obj := clusterConfigMap("steady", "alice's")
	r.objs[steady] = obj
	m, spec := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"}, Options{Resolver: r})
	for _, k := range append(keys, steady) {
		m.Submit(Change{Target: spec.Key, Key: k, Author: "alice"})
	}
	r.moved = func(k ObjectKey) { m.Submit(Change{Target: spec.Key, Key: k, Author: "bob"}) }

	_, err := m.workerOf(spec.Key).flushIfDue(context.Background(), spec.Key, 2*time.Hour)
	require.NoError(t, err)

	files := filesAtTip(t, m.workerOf(spec.Key), "live")
	assert.Contains(t, files, "live/app/configmaps/steady.yaml", "alice's window commits what stayed hers")
	for _, k := range keys {
		assert.NotContains(t, files, "live/app/configmaps/"+k.Name+".yaml", "bob's change goes with his window, under his name")
	}
	assert.Equal(t, len(keys), m.pendingOf(spec.Key), "they wait in bob's window")
}
