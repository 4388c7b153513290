package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gitops-reverser/gitops-reverser/certs"
	"github.com/gitops-reverser/gitops-reverser/test/envtestsuite"
)

// The package's one control plane: its config, scheme and an uncached client for test reads.
var (
	restConfig *rest.Config
	scheme     *runtime.Scheme
	k8s        client.Client
)

func TestMain(m *testing.M) {
	envtestsuite.Main(m, false, func(cfg *rest.Config) (func(), error) {
		restConfig = cfg
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, err
		}
		var err error
		k8s, err = client.New(cfg, client.Options{Scheme: scheme})
		return nil, err
	})
}

// operator is one replica under test: a manager whose webhook server is gated by certs.
type operator struct {
	addr string // where its webhook server listens
}

// startOperator runs a manager with the certificate machinery and a webhook server on the
// loopback port; register adds the handlers. It returns once the certificate files exist and
// stops when the test ends.
func startOperator(t *testing.T, opts certs.Options, port int, register func(webhook.Server)) *operator {
	t.Helper()
	opts.Log = ctrl.Log.WithName(t.Name())
	c, err := certs.New(opts)
	require.NoError(t, err)
	skipNames := true // every test has its own manager with the same controller names
	srv := c.GatedServer(webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: opts.CertDir}))
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          srv,
		Controller:             config.Controller{SkipNameValidation: &skipNames},
	})
	require.NoError(t, err)
	require.NoError(t, c.SetupWithManager(mgr))
	// The manager runs its webhook server once something asks for it, as the webhook builder does.
	register(mgr.GetWebhookServer())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	waitCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	require.NoError(t, c.WaitReady(waitCtx))
	return &operator{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// freePort asks the kernel for a loopback port that is free right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// servedCert connects to addr trusting only the CAs of bundle and returns the leaf served.
func servedCert(addr string, bundle []byte) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, errors.New("the CA bundle holds no certificate")
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// waitServing polls until the webhook server at addr serves a certificate that bundle trusts
// and accept likes; servers start a moment after their certificate files exist.
func waitServing(t *testing.T, addr string, bundle []byte, accept func(*x509.Certificate) bool) *x509.Certificate {
	t.Helper()
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		leaf, err := servedCert(addr, bundle)
		if err == nil && accept(leaf) {
			return leaf
		}
		last = err
	}
	t.Fatalf("the webhook server at %s never served the expected certificate (last error: %v)", addr, last)
	return nil
}
