package status

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MaxRetryDelay caps the backoff of every reconciler of this project whose reconcile failed,
// as the writer caps a failed commit's. controller-runtime's default grows to 1000 s: after
// an outage of twenty minutes a GitTarget that could not fetch its branch at start (the only
// time the writer fetches for it), or a WatchRule that could not read discovery, would wait
// up to a quarter of an hour more once the outage is over, with nothing else to wake it.
const MaxRetryDelay = 2 * time.Minute

// RetryLimiter backs each failing object off from 5 ms, doubling, up to MaxRetryDelay, and,
// as controller-runtime's default does, lets no more than 10 retries a second (bursts of
// 100) through in all, so an outage that fails many objects at once does not retry in a
// tight loop.
func RetryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
