package status

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestAReconcileThatKeepsFailingIsRetriedAtLeastEveryTwoMinutes(t *testing.T) {
	limiter := RetryLimiter()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ops", Name: "live"}}
	var last time.Duration
	for range 40 { // an outage of hours
		last = limiter.When(req)
	}
	assert.Equal(t, 2*time.Minute, last)
	limiter.Forget(req)
	assert.Equal(t, 5*time.Millisecond, limiter.When(req), "a success starts again from the shortest wait")

	many := RetryLimiter()
	var longest time.Duration
	for i := range 300 { // an outage failing 300 GitTargets at once
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ops", Name: fmt.Sprint("t", i)}}
		longest = max(longest, many.When(req))
	}
	assert.Greater(t, longest, 15*time.Second, "no more than 10 retries a second in all, after a burst of 100")
}
