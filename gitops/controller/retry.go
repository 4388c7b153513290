package controller

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// ClientOptions are the manager's client options these reconcilers are written for:
// Secrets are read from the API server and never cached (their watches here are by
// metadata only), so the operator does not hold every Secret of the cluster, Helm
// releases and all, in memory for the few GitProviders and GitTargets name. Flux's
// controllers do the same.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}
