// Command gitops-reverser runs the operator: it mirrors accepted cluster state into Git.
// `gitops-reverser dev` starts a local sandbox (control plane, Git repository, operator).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/certs"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	gitopsctrl "github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/watcher"
	watchctrl "github.com/gitops-reverser/gitops-reverser/watcher/controller"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "dev" {
		if err := runDev(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "dev:", err)
			os.Exit(1)
		}
		return
	}
	var opts Options
	fs := flag.CommandLine
	opts.bind(fs)
	config.RegisterFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loading kubeconfig:", err)
		os.Exit(1)
	}
	if err := run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// newScheme registers the kinds the manager reads.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// run wires the watcher, the Git writer and the controllers into one manager and runs it.
func run(ctx context.Context, cfg *rest.Config, opts Options) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	leaderNS := opts.LeaderElectionNS
	if leaderNS == "" {
		leaderNS = opts.Namespace
	}
	var serving *certs.Certs
	var webhookServer webhook.Server
	if opts.WebhookPort != 0 {
		co := opts.Certs
		co.Namespace, co.CertDir = opts.Namespace, opts.WebhookCertDir
		co.WebhookConfigurations = []string{opts.WebhookConfigName}
		co.Log = ctrl.Log.WithName("certs")
		if serving, err = certs.New(co); err != nil {
			return fmt.Errorf("webhook certificates: %w", err)
		}
		webhookServer = serving.GatedServer(webhook.NewServer(webhook.Options{
			Host: opts.WebhookHost, Port: opts.WebhookPort, CertDir: opts.WebhookCertDir,
		}))
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		LeaderElection:          opts.LeaderElect,
		LeaderElectionID:        "gitops-reverser.reverser.gitops.dev",
		LeaderElectionNamespace: leaderNS,
		WebhookServer:           webhookServer,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("gitops-reverser")
	statusEvents := make(chan event.TypedGenericEvent[*v1alpha1.GitTarget], 1024)
	var w *watcher.Watcher
	writerMetrics, err := batch.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	writer := batch.NewManager(batch.Options{
		Metrics: writerMetrics,
		WorkDir: opts.WorkDir,
		Log:     log.WithName("writer"),
		OnStatus: func(k types.NamespacedName) {
			t := &v1alpha1.GitTarget{}
			t.Namespace, t.Name = k.Namespace, k.Name
			select {
			case statusEvents <- event.TypedGenericEvent[*v1alpha1.GitTarget]{Object: t}:
			default:
			}
		},
		OnFolderReady: func(k types.NamespacedName) { w.Resync(k) },
		Resolver:      resolverFunc(func() batch.Resolver { return w }),
		Sensitive:     opts.sensitive(),
	})
	nsCache := mgr.GetCache()
	w = watcher.New(watcher.Options{
		Client: dyn,
		Noise:  opts.Noise,
		Sink:   writer,
		Log:    log.WithName("watcher"),
		NamespaceLabels: func(name string) labels.Set {
			var ns corev1.Namespace
			if err := nsCache.Get(context.Background(), types.NamespacedName{Name: name}, &ns); err != nil {
				return nil
			}
			return ns.Labels
		},
	})
	if err := mgr.Add(writer); err != nil {
		return err
	}
	if err := mgr.Add(w); err != nil {
		return err
	}
	c := mgr.GetClient()
	setups := []func() error{
		func() error {
			return (&gitopsctrl.GitProviderReconciler{Client: c, Interval: opts.ProviderCheckInterval}).SetupWithManager(mgr)
		},
		func() error {
			return (&gitopsctrl.GitTargetReconciler{Client: c, Writer: writer, PollInterval: opts.GitPollInterval, StatusEvents: statusEvents,
				Recorder: mgr.GetEventRecorder("gitops-reverser")}).SetupWithManager(mgr)
		},
		func() error {
			return (&watchctrl.WatchRuleReconciler{Client: c, Discovery: dc, Registry: w}).SetupWithManager(mgr)
		},
		func() error {
			return (&watchctrl.ClusterWatchRuleReconciler{Client: c, Discovery: dc, Registry: w}).SetupWithManager(mgr)
		},
		func() error { return mgr.AddHealthzCheck("healthz", healthz.Ping) },
		func() error { return mgr.AddReadyzCheck("readyz", healthz.Ping) },
	}
	for _, s := range setups {
		if err := s(); err != nil {
			return err
		}
	}
	if serving != nil {
		if err := serving.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("webhook certificates: %w", err)
		}
		if err := setupWebhooks(ctx, mgr, cfg, opts, writer); err != nil {
			return fmt.Errorf("setting up the admission webhooks: %w", err)
		}
	}
	log.Info("starting", "workDir", opts.WorkDir)
	return mgr.Start(ctx)
}

// resolverFunc breaks the construction cycle between the writer and the watcher.
type resolverFunc func() batch.Resolver

func (f resolverFunc) Current(t types.NamespacedName, k batch.ObjectKey) (*unstructured.Unstructured, error) {
	return f().Current(t, k)
}
