package controller

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MaxRetryDelay caps the backoff of a GitTarget or GitProvider whose reconcile failed, as
// the writer caps a failed commit's. controller-runtime's default grows to 1000 s: after an
// outage of twenty minutes a target that could not fetch its branch at start (the only
// time the writer fetches for it) would wait up to a quarter of an hour more once Git is
// back, with its changes.
const MaxRetryDelay = 2 * time.Minute

// retryOptions are the options of the controllers that reach Git: failures back off from
// 5 ms, doubling, up to MaxRetryDelay.
func retryOptions() controller.Options {
	return controller.Options{RateLimiter: retryLimiter()}
}

func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxRetryDelay)
}
