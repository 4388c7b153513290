package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/gitops-reverser/gitops-reverser/api/status"
)

// DefaultConcurrent is how many GitTargets, and how many GitProviders, are reconciled at
// once by default (--concurrent).
const DefaultConcurrent = 4

// retryOptions are the options of the controllers that reach Git: the project's rate
// limiter (status.RetryLimiter, capped at status.MaxRetryDelay), and concurrent reconciles
// (DefaultConcurrent when not positive), so that a remote that stops answering holds one
// of them up to the Git timeout, not every other tenant's objects behind it.
func retryOptions(concurrent int) controller.Options {
	if concurrent <= 0 {
		concurrent = DefaultConcurrent
	}
	return controller.Options{RateLimiter: status.RetryLimiter(), MaxConcurrentReconciles: concurrent}
}
