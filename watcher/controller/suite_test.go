package controller_test

import (
	"context"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/test/envtestsuite"
	"github.com/gitops-reverser/gitops-reverser/watcher"
	"github.com/gitops-reverser/gitops-reverser/watcher/controller"
)

var (
	k8s      client.Client
	registry = &recordingRegistry{rules: map[string][]watcher.Claim{}, waiting: map[string]bool{}}
	// shared is the discovery the suite's reconcilers read, through their cache.
	shared *controller.Discovery
	// restConfig reaches the test API server.
	restConfig *rest.Config
)

// recordingRegistry stands in for the watcher so tests can read the registered claims; the
// watcher itself runs for real in the e2e suite.
type recordingRegistry struct {
	mu      sync.Mutex
	rules   map[string][]watcher.Claim
	waiting map[string]bool
}

func (r *recordingRegistry) Claims(key string) []watcher.Claim { return r.claims(key) }

// ListProblems finds none: the recording registry starts no informers.
func (r *recordingRegistry) ListProblems([]schema.GroupVersionResource) ([]string, bool) {
	return nil, false
}

func (r *recordingRegistry) Registered(keys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if _, ok := r.rules[k]; !ok {
			return false
		}
	}
	return true
}

func (r *recordingRegistry) SetRule(key string, claims []watcher.Claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules[key] = claims
	delete(r.waiting, key)
}

// loaded says the rule of key registered as loaded, not waiting for an API.
func (r *recordingRegistry) loaded(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, known := r.rules[key]
	return known && !r.waiting[key]
}

func (r *recordingRegistry) SetRuleWaiting(key string, _ types.NamespacedName, claims []watcher.Claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules[key] = claims
	r.waiting[key] = true
}

func (r *recordingRegistry) ForgetRule(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.rules, key)
}

func (r *recordingRegistry) claims(key string) []watcher.Claim {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rules[key]
}

func TestMain(m *testing.M) {
	envtestsuite.Main(m, true, startControllers)
}

// startControllers runs both rule reconcilers against the recording registry.
func startControllers(cfg *rest.Config) (func(), error) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, err
	}
	restConfig = cfg
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	shared = controller.NewDiscovery(dc)
	if err := (&controller.WatchRuleReconciler{Client: mgr.GetClient(), Discovery: shared, Registry: registry}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&controller.ClusterWatchRuleReconciler{Client: mgr.GetClient(), Discovery: shared, Registry: registry}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	// An uncached client: tests read what they just wrote.
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() { cancel(); <-done }, nil
}
