package controller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

// The suite's manager runs with these options, as the operator's does, so every envtest
// case here reads Secrets uncached; this only guards the options themselves.
func TestTheManagersClientNeverCachesSecrets(t *testing.T) {
	opts := controller.ClientOptions()
	require.NotNil(t, opts.Cache)
	assert.Contains(t, opts.Cache.DisableFor, &corev1.Secret{})
}
