package controller

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClientOptions are the manager's client options these reconcilers are written for:
// Secrets are read from the API server and never cached (their watches here are by
// metadata only), so the operator does not hold every Secret of the cluster, Helm
// releases and all, in memory for the few GitProviders and GitTargets name. Flux's
// controllers do the same.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}
