package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestACRDEventReconcilesEveryRuleAtOnceAndAgainOnceDiscoveryCaughtUp(t *testing.T) {
	rule := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "widgets"}}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := everyRule(func(context.Context) []reconcile.Request { return []reconcile.Request{rule} }, 50*time.Millisecond)

	h.Update(context.Background(), event.UpdateEvent{}, q) // the CRD became Established
	assert.Equal(t, 1, q.Len(), "at once")
	got, _ := q.Get()
	assert.Equal(t, rule, got)
	q.Done(got)

	got, _ = q.Get() // blocks until the second one is due
	assert.Equal(t, rule, got, "again, for a discovery that had not caught up with the CRD")
	q.Done(got)
}
