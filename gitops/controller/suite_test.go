package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/test/envtestsuite"
)

// k8s is the client of the package's one control plane.
var k8s client.Client

// managerCache is the controllers' cache, with the indexes their setup registers.
var managerCache client.Reader

// writer is the controllers' real writer, which tests ask what it has registered.
var writer *batch.Manager

// noObjects resolves nothing: these tests exercise the controllers, not the watcher.
type noObjects struct{}

func (noObjects) Current(types.NamespacedName, batch.ObjectKey) (*unstructured.Unstructured, error) {
	return nil, nil
}

func TestMain(m *testing.M) {
	envtestsuite.Main(m, true, startControllers)
}

// startControllers runs both reconcilers and a real writer on the control plane.
func startControllers(cfg *rest.Config) (func(), error) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Client: controller.ClientOptions()})
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "controller-test-")
	if err != nil {
		return nil, err
	}
	writer = batch.NewManager(batch.Options{WorkDir: filepath.Join(work, "clones"), Resolver: noObjects{}, Log: ctrl.Log})
	if err := mgr.Add(writer); err != nil {
		return nil, err
	}
	if err := (&controller.GitProviderReconciler{Client: mgr.GetClient(), Interval: time.Minute}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&controller.GitTargetReconciler{Client: mgr.GetClient(), Writer: writer, PollInterval: time.Second,
		Recorder: mgr.GetEventRecorder("gitops-reverser")}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	managerCache = mgr.GetCache()
	// An uncached client: tests read what they just wrote.
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() { cancel(); <-done; _ = os.RemoveAll(work) }, nil
}
