package certs_test

import (
	"context"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gitops-reverser/gitops-reverser/certs"
)

// In cert-manager mode the operator only reads the Secret. cert-manager does not run here:
// the test writes the Secret itself, standing in for cert-manager's output (tls.crt, tls.key,
// ca.crt in a kubernetes.io/tls Secret), then renews it the way cert-manager would.
func TestCertManagerSecretIsSyncedToTheCertDir(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	names := certs.Names{DNSNames: []string{"hook.default.svc"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	caCrt, caKey, err := certs.NewCA(now, time.Hour)
	require.NoError(t, err)
	issue := func() map[string][]byte {
		crt, key, err := certs.Issue(caCrt, caKey, names, now, time.Hour)
		require.NoError(t, err)
		return map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": caCrt}
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cert-manager-webhook-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       issue(),
	}
	require.NoError(t, k8s.Create(ctx, sec))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), sec) })

	dir := t.TempDir()
	op := startOperator(t, certs.Options{
		Mode: certs.ModeCertManager, Namespace: "default", SecretName: sec.Name, CertDir: dir,
	}, freePort(t), func(webhook.Server) {})
	assertFiles(t, dir, sec.Data)
	first := waitServing(t, op.addr, caCrt, func(*x509.Certificate) bool { return true })

	sec.Data = issue()
	require.NoError(t, k8s.Update(ctx, sec))
	renewed := waitServing(t, op.addr, caCrt, func(c *x509.Certificate) bool { return c.SerialNumber.Cmp(first.SerialNumber) != 0 })
	assertFiles(t, dir, sec.Data)
	assert.Equal(t, 0, renewed.SerialNumber.Cmp(mustLeaf(t, sec.Data["tls.crt"]).SerialNumber), "the renewed certificate is served")

	var stored corev1.Secret
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sec), &stored))
	assert.Equal(t, sec.ResourceVersion, stored.ResourceVersion, "the operator never writes a cert-manager Secret")
}

// mustLeaf parses the first certificate of a PEM value.
func mustLeaf(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := certutil.ParseCertsPEM(pemBytes)
	require.NoError(t, err)
	return c[0]
}

// assertFiles requires the certificate directory to hold the Secret's pair.
func assertFiles(t *testing.T, dir string, data map[string][]byte) {
	t.Helper()
	for _, name := range []string{"tls.crt", "tls.key"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, string(data[name]), string(got), name)
	}
}
