package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
)

func parseAll(t *testing.T, pemBytes []byte) []*x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(pemBytes)
	require.NoError(t, err)
	return certs
}

func TestIssue(t *testing.T) {
	ca := newTestCA(t, t0, 10*time.Hour)

	t.Run("a serving certificate is an ECDSA P-256 server certificate for exactly the names, chained to its CA", func(t *testing.T) {
		leaf := issueTest(t, ca, testNames, t0, time.Hour)
		c := parseAll(t, leaf.crt)[0]
		assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, c.ExtKeyUsage)
		assert.False(t, c.IsCA)
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		require.True(t, ok)
		assert.Equal(t, elliptic.P256(), pub.Curve)
		renew, why := NeedsRenewal(leaf.crt, t0, 0, testNames)
		assert.False(t, renew, why)
		assert.NoError(t, chainsTo(leaf.crt, ca.crt, t0))
		assert.Equal(t, t0.Add(time.Hour), c.NotAfter)
		assert.Equal(t, t0.Add(-notBeforeSkew), c.NotBefore)
	})
	t.Run("a serving certificate never outlives its CA", func(t *testing.T) {
		leaf := issueTest(t, ca, testNames, t0.Add(9*time.Hour+30*time.Minute), time.Hour)
		assert.Equal(t, t0.Add(10*time.Hour), parseAll(t, leaf.crt)[0].NotAfter)
	})
	t.Run("two issues give two serial numbers", func(t *testing.T) {
		a := parseAll(t, issueTest(t, ca, testNames, t0, time.Hour).crt)[0]
		b := parseAll(t, issueTest(t, ca, testNames, t0, time.Hour).crt)[0]
		assert.NotEqual(t, a.SerialNumber, b.SerialNumber)
	})
	t.Run("a key that is not the CA's is refused", func(t *testing.T) {
		_, _, err := Issue(ca.crt, []byte("garbage"), testNames, t0, time.Hour)
		assert.ErrorContains(t, err, "private key")
	})
}

func TestMergeBundle(t *testing.T) {
	newCA := newTestCA(t, t0, 10*time.Hour)
	oldCA := newTestCA(t, t0.Add(-8*time.Hour), 10*time.Hour)
	expired := newTestCA(t, t0.Add(-20*time.Hour), 10*time.Hour)
	leaf := issueTest(t, oldCA, testNames, t0.Add(-time.Hour), 2*time.Hour)
	tests := []struct {
		name string
		old  []byte
		want [][]byte
	}{
		{name: "the new CA comes first and the still-valid old ones follow", old: oldCA.crt, want: [][]byte{newCA.crt, oldCA.crt}},
		{name: "expired old CAs are dropped", old: concat(oldCA.crt, expired.crt), want: [][]byte{newCA.crt, oldCA.crt}},
		{name: "a serving certificate in the old bundle is dropped", old: concat(leaf.crt, oldCA.crt), want: [][]byte{newCA.crt, oldCA.crt}},
		{name: "the new CA is not repeated", old: concat(newCA.crt, oldCA.crt), want: [][]byte{newCA.crt, oldCA.crt}},
		{name: "a damaged old bundle is replaced", old: []byte("garbage"), want: [][]byte{newCA.crt}},
		{name: "no old bundle gives the new CA alone", old: nil, want: [][]byte{newCA.crt}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mergeBundle(newCA.crt, tt.old, t0)
			require.NoError(t, err)
			assert.Equal(t, string(concat(tt.want...)), string(got))
		})
	}
}

func TestApplyStep(t *testing.T) {
	t.Run("an empty Secret gets a CA and a certificate that need nothing more", func(t *testing.T) {
		plan := testPolicy.decide(nil, t0)
		data, err := testPolicy.apply(plan, nil, t0)
		require.NoError(t, err)
		next := testPolicy.decide(data, t0)
		assert.False(t, next.NewCA || next.NewCert, next.Reason)
		assert.Equal(t, 40*time.Minute, next.RecheckAfter)
	})
	t.Run("a CA rotation puts the new CA first, keeps the old one and the serving pair", func(t *testing.T) {
		ca := newTestCA(t, t0, 10*time.Hour)
		leaf := issueTest(t, ca, testNames, t0.Add(8*time.Hour+20*time.Minute), time.Hour)
		before := secretOf(ca.crt, ca, leaf)
		now := t0.Add(8*time.Hour + 30*time.Minute)
		data, err := testPolicy.apply(step{NewCA: true}, before, now)
		require.NoError(t, err)
		bundle := parseAll(t, data[keyCACert])
		require.Len(t, bundle, 2)
		assert.Equal(t, parseAll(t, ca.crt)[0].Raw, bundle[1].Raw)
		assert.NotEqual(t, ca.key, data[keyCAKey])
		assert.Equal(t, leaf, pair{data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]})
		assert.Equal(t, string(ca.crt), string(before[keyCACert]), "the input is not changed")
		renew, why := CANeedsRenewal(data[keyCACert], data[keyCAKey], now, testPolicy.CARenewBefore)
		assert.False(t, renew, why)
		assert.Empty(t, servingProblem(data, now, 0, testNames))
	})
	t.Run("a renewal signs with the first CA of the bundle", func(t *testing.T) {
		oldCA := newTestCA(t, t0, 10*time.Hour)
		newCA := newTestCA(t, t0.Add(8*time.Hour+30*time.Minute), 10*time.Hour)
		leaf := issueTest(t, oldCA, testNames, t0.Add(8*time.Hour+20*time.Minute), time.Hour)
		now := t0.Add(9 * time.Hour)
		data, err := testPolicy.apply(step{NewCert: true}, secretOf(concat(newCA.crt, oldCA.crt), newCA, leaf), now)
		require.NoError(t, err)
		assert.NoError(t, chainsTo(data[corev1.TLSCertKey], newCA.crt, now))
		assert.Empty(t, servingProblem(data, now, testPolicy.RenewBefore, testNames))
	})
}
