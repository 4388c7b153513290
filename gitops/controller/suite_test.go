package controller_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/config"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

// k8s is the client of the package's one control plane.
var k8s client.Client

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

// noObjects resolves nothing: these tests exercise the controllers, not the watcher.
type noObjects struct{}

func (noObjects) Current(types.NamespacedName, batch.ObjectKey) (*unstructured.Unstructured, error) {
	return nil, nil
}

func runSuite(m *testing.M) (int, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return 0, fmt.Errorf("KUBEBUILDER_ASSETS is not set; run `make test`")
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(testLogOutput())))
	crds, err := config.LoadCRDs()
	if err != nil {
		return 0, err
	}
	env := &envtest.Environment{CRDInstallOptions: envtest.CRDInstallOptions{CRDs: crds}}
	cfg, err := env.Start()
	if err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return 0, err
	}
	work, err := os.MkdirTemp("", "controller-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	writer := batch.NewManager(batch.Options{WorkDir: filepath.Join(work, "clones"), Resolver: noObjects{}, Log: ctrl.Log})
	if err := mgr.Add(writer); err != nil {
		return 0, err
	}
	if err := (&controller.GitProviderReconciler{Client: mgr.GetClient(), Interval: time.Minute}).SetupWithManager(mgr); err != nil {
		return 0, err
	}
	if err := (&controller.GitTargetReconciler{Client: mgr.GetClient(), Writer: writer, PollInterval: time.Second}).SetupWithManager(mgr); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	// An uncached client: tests read what they just wrote.
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// testLogOutput shows the controllers' logs only when TEST_LOG is set.
func testLogOutput() io.Writer {
	if os.Getenv("TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
