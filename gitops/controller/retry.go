package controller

import (
	"time"

	"golang.org/x/time/rate"
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

// DefaultConcurrent is how many GitTargets, and how many GitProviders, are reconciled at
// once by default (--concurrent).
const DefaultConcurrent = 4

// retryOptions are the options of the controllers that reach Git: controller-runtime's
// default rate limiter but for its longest wait, MaxRetryDelay, and concurrent reconciles
// (DefaultConcurrent when not positive), so that a remote that stops answering holds one
// of them up to the Git timeout, not every other tenant's objects behind it.
func retryOptions(concurrent int) controller.Options {
	if concurrent <= 0 {
		concurrent = DefaultConcurrent
	}
	return controller.Options{RateLimiter: retryLimiter(), MaxConcurrentReconciles: concurrent}
}

// retryLimiter backs each failing object off from 5 ms, doubling, up to MaxRetryDelay, and,
// as the default does, lets no more than 10 retries a second (bursts of 100) through in
// all, so an outage that fails many GitTargets at once does not fetch in a tight loop.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
