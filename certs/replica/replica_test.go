package replica_test

import (
	"crypto/tls"
	"crypto/x509"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"github.com/gitops-reverser/gitops-reverser/test/testcerts"
)

// pair is a throwaway serving key pair and its leaf, as a peer presents it.
func pair(t *testing.T) (*tls.Certificate, *x509.Certificate) {
	t.Helper()
	c, err := testcerts.ReplicaKeyPair(t).Current()
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return c, leaf
}

func TestARotatingKeyPairAcceptsThePreviousKeyForAWhileAfterARenewal(t *testing.T) {
	a, aLeaf := pair(t)
	b, bLeaf := pair(t)
	_, stranger := pair(t)
	var held atomic.Pointer[tls.Certificate]
	held.Store(a)
	keys := func(grace time.Duration) *replica.Rotating {
		return &replica.Rotating{Load: func() (*tls.Certificate, error) { return held.Load(), nil }, Grace: grace, Every: time.Nanosecond}
	}
	within, past := keys(2*time.Hour), keys(0) // testcerts backdates certificates an hour
	for _, r := range []*replica.Rotating{within, past} {
		ok, err := r.Accepts(aLeaf)
		require.NoError(t, err)
		require.True(t, ok, "the key it holds")
		ok, _ = r.Accepts(bLeaf)
		require.False(t, ok, "a key it never held")
	}

	late := keys(30 * time.Minute) // b was made an hour ago (testcerts backdates it): this replica sees the change late
	_, err := late.Current()
	require.NoError(t, err)
	held.Store(b) // the Secret was renewed
	_, err = late.Current()
	require.NoError(t, err)
	cur, err := within.Current()
	require.NoError(t, err)
	assert.Same(t, b, cur, "the new pair is presented")
	for _, tc := range []struct {
		name string
		r    *replica.Rotating
		peer *x509.Certificate
		want bool
	}{
		{"accepts the new key", within, bLeaf, true},
		{"accepts the previous key within its grace: a peer that has not read the Secret yet", within, aLeaf, true},
		{"refuses the previous key once its grace is over", past, aLeaf, false},
		{"refuses a key no replica held", within, stranger, false},
		{"refuses the previous key when the new certificate was made longer ago than its grace", late, aLeaf, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := tc.r.Accepts(tc.peer)
			require.NoError(t, err)
			assert.Equal(t, tc.want, ok)
		})
	}
}
