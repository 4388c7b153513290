// Command gitops-reverser runs the operator: it mirrors accepted cluster state into Git.
// `gitops-reverser dev` starts a local sandbox (control plane, Git repository, operator).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/certs"
	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	gitopsctrl "github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/watcher"
	"github.com/gitops-reverser/gitops-reverser/watcher/attribution"
	watchctrl "github.com/gitops-reverser/gitops-reverser/watcher/controller"
)

func main() {
	encrypt.SilenceLibraryLogs() // sops would print a plaintext comment of an encrypted file
	repo.BoundHTTPErrorBodies()  // go-git would read a Git server's error answer whole, however long
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
	if flag.NArg() > 0 {
		// The flag package stops at the first argument that is not a flag: every flag
		// after it would be ignored without a word.
		fmt.Fprintf(os.Stderr, "unexpected argument %q: flags after it would be ignored "+
			"(a boolean flag takes its value as --flag=false, not --flag false)\n", flag.Arg(0))
		os.Exit(2)
	}
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
	if err := opts.check(); err != nil {
		return err
	}
	serving, webhookServer, err := webhookServing(opts)
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, opts, webhookServer)
	if err != nil {
		return err
	}
	o, err := newOperator(ctx, cfg, mgr, opts)
	if err != nil {
		return err
	}
	if err := o.setupControllers(cfg, opts); err != nil {
		return err
	}
	if serving != nil {
		if err := o.setupServing(ctx, cfg, opts, serving); err != nil {
			return err
		}
	}
	o.log.Info("starting", "workDir", opts.WorkDir)
	return mgr.Start(ctx)
}

// leaderNamespace is where the leader election Lease lives.
func (o Options) leaderNamespace() string {
	if o.LeaderElectionNS != "" {
		return o.LeaderElectionNS
	}
	return o.Namespace
}

// webhookServing makes the webhook certificates and the server that waits for them; both
// nil with --webhook-port=0.
func webhookServing(opts Options) (*certs.Certs, webhook.Server, error) {
	if opts.WebhookPort == 0 {
		return nil, nil, nil
	}
	co := opts.Certs
	co.Namespace, co.CertDir = opts.Namespace, opts.WebhookCertDir
	co.WebhookConfigurations = []string{opts.WebhookConfigName}
	if opts.MutatingWebhookConfigName != "" {
		co.MutatingWebhookConfigurations = []string{opts.MutatingWebhookConfigName}
	}
	co.Log = ctrl.Log.WithName("certs")
	serving, err := certs.New(co)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: %w", err)
	}
	return serving, serving.GatedServer(webhook.NewServer(webhook.Options{
		Host: opts.WebhookHost, Port: opts.WebhookPort, CertDir: opts.WebhookCertDir,
		// Replicas forwarding attribution records present the serving key pair; the
		// API server presents nothing, which stays fine.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }},
	})), nil
}

// newManager makes the controller-runtime manager, with leader election on a Lease that
// names this replica by the address other replicas reach it at.
func newManager(cfg *rest.Config, opts Options, webhookServer webhook.Server) (ctrl.Manager, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	var lock resourcelock.Interface
	if opts.LeaderElect {
		identity := attribution.Identity(uniqueIdentity(), opts.advertiseAddress())
		if lock, err = leaseLock(cfg, opts.leaderNamespace(), identity); err != nil {
			return nil, fmt.Errorf("leader election: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Client:                  gitopsctrl.ClientOptions(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: opts.leaderNamespace(),

		LeaderElectionResourceLockInterface: lock,
		// run returns right after the manager stops, so the next leader need not wait for
		// the Lease to expire.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// operator is the Git writer and the watcher, which refer to each other (the watcher hands
// changes to the writer, the writer reads objects through the watcher), and what joins
// them to the manager's controllers and webhooks.
type operator struct {
	mgr         ctrl.Manager
	log         logr.Logger
	writer      *batch.Manager
	watcher     *watcher.Watcher
	book        *attribution.Book
	attrMetrics *attribution.Metrics
	// statusEvents and requestEvents wake the GitTarget and CommitRequest controllers
	// when the writer has news for them.
	statusEvents  chan event.TypedGenericEvent[*v1alpha1.GitTarget]
	requestEvents chan event.TypedGenericEvent[*v1alpha1.CommitRequest]
	// watchedChanged keeps the webhook's rules in step with what is watched; set up
	// before anything runs, nil without webhooks.
	watchedChanged func()
}

// newOperator makes the writer and the watcher and adds them to mgr, with the sweep of
// clones left by GitTargets deleted while no replica ran.
func newOperator(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, opts Options) (*operator, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	o := &operator{
		mgr: mgr, log: ctrl.Log.WithName("gitops-reverser"), book: attribution.NewBook(0, 0),
		statusEvents:  make(chan event.TypedGenericEvent[*v1alpha1.GitTarget], 1024),
		requestEvents: make(chan event.TypedGenericEvent[*v1alpha1.CommitRequest], 1024),
	}
	writerMetrics, err := batch.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return nil, err
	}
	if o.attrMetrics, err = attribution.NewMetrics(ctrlmetrics.Registry, o.book); err != nil {
		return nil, err
	}
	o.writer = batch.NewManager(o.writerOptions(ctx, opts, writerMetrics))
	deletedNamespaces := watcher.NewDeletedNamespaces(deletedNamespaceMemory)
	o.watcher = watcher.New(o.watcherOptions(dyn, opts, deletedNamespaces))
	if err := mgr.Add(o.writer); err != nil {
		return nil, err
	}
	if err := mgr.Add(o.watcher); err != nil {
		return nil, err
	}
	// Clones of GitTargets deleted while no replica ran; the API reader lists them all.
	if err := mgr.Add(&gitopsctrl.CloneSweeper{Reader: mgr.GetAPIReader(), Writer: o.writer, Log: o.log.WithName("clones")}); err != nil {
		return nil, err
	}
	if err := followNamespaceLabels(ctx, mgr.GetCache(), o.watcher, deletedNamespaces); err != nil {
		return nil, err
	}
	return o, nil
}

// writerOptions configures the Git writer; it reads objects through the watcher, made
// after it.
func (o *operator) writerOptions(ctx context.Context, opts Options, metrics *batch.Metrics) batch.Options {
	return batch.Options{
		Metrics:           metrics,
		AuthorEmailDomain: opts.AuthorEmailDomain,
		OnRequest:         notifier(ctx, o.requestEvents, func() *v1alpha1.CommitRequest { return &v1alpha1.CommitRequest{} }),
		WorkDir:           opts.WorkDir,
		Log:               o.log.WithName("writer"),
		OnStatus:          notifier(ctx, o.statusEvents, func() *v1alpha1.GitTarget { return &v1alpha1.GitTarget{} }),
		OnFolderReady:     func(k types.NamespacedName) { o.watcher.Resync(k) },
		Resolver:          resolverFunc(func() batch.Resolver { return o.watcher }),
		Sensitive:         opts.sensitive(),
		// Server defaults nobody set stay out of Git unless --keep-defaulted-fields.
		KeepDefaultedFields: opts.KeepDefaultedFields,
		CompactLooseObjects: opts.compactLooseObjects(),
		GitTimeout:          opts.gitTimeout(),
		IndexKey:            buildKey(),
		Credentials: func(k types.NamespacedName) (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), credentialsLookupTimeout)
			defer cancel()
			return gitopsctrl.KeptOutOfGit(ctx, o.mgr.GetCache(), k)
		},
	}
}

// watcherOptions configures the watcher, which hands what it sees to the writer.
func (o *operator) watcherOptions(dyn dynamic.Interface, opts Options, deletedNamespaces *watcher.DeletedNamespaces) watcher.Options {
	nsCache := o.mgr.GetCache()
	return watcher.Options{
		Client:    dyn,
		Noise:     opts.Noise,
		Sink:      o.writer,
		Log:       o.log.WithName("watcher"),
		Sensitive: opts.sensitive(),

		Attribution:          o.book,
		AttributionMetrics:   o.attrMetrics,
		NamespaceLabels:      namespaceLabels(nsCache, nil, deletedNamespaces),
		FreshNamespaceLabels: namespaceLabels(nsCache, o.mgr.GetAPIReader(), deletedNamespaces),
		NamespaceKnown:       namespaceKnown(nsCache),
		// The writer reads field ownership from managedFields unless it writes every field.
		KeepManagedFields: !opts.KeepDefaultedFields,
		OnWatchedChange: func() {
			if o.watchedChanged != nil {
				o.watchedChanged()
			}
		},
		RuleKeys: ruleKeys(nsCache),
	}
}

// setupControllers adds the controllers of the operator's kinds and the health checks.
func (o *operator) setupControllers(cfg *rest.Config, opts Options) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	rulesDiscovery := watchctrl.NewDiscovery(dc)
	mgr, c := o.mgr, o.mgr.GetClient()
	setups := []func() error{
		func() error {
			return (&gitopsctrl.GitProviderReconciler{Client: c, Interval: positiveOr(opts.ProviderCheckInterval, defaultProviderCheckInterval), Timeout: opts.gitTimeout(),
				Concurrent: opts.Concurrent}).SetupWithManager(mgr)
		},
		func() error {
			return (&gitopsctrl.GitTargetReconciler{Client: c, Writer: o.writer, PollInterval: positiveOr(opts.GitPollInterval, defaultGitPollInterval), Concurrent: opts.Concurrent, StatusEvents: o.statusEvents,
				Recorder: mgr.GetEventRecorder("gitops-reverser")}).SetupWithManager(mgr)
		},
		func() error {
			return (&gitopsctrl.CommitRequestReconciler{Client: c, Writer: o.writer, Events: o.requestEvents, APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr)
		},
		func() error {
			return (&watchctrl.WatchRuleReconciler{Client: c, Discovery: rulesDiscovery, Registry: o.watcher}).SetupWithManager(mgr)
		},
		func() error {
			return (&watchctrl.ClusterWatchRuleReconciler{Client: c, Discovery: rulesDiscovery, Registry: o.watcher}).SetupWithManager(mgr)
		},
		func() error { return mgr.AddHealthzCheck("healthz", healthz.Ping) },
		func() error { return mgr.AddReadyzCheck("readyz", healthz.Ping) },
	}
	for _, s := range setups {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// setupServing adds the certificate manager and the admission webhooks, with the routing
// of attribution records to the leader when other replicas may lead.
func (o *operator) setupServing(ctx context.Context, cfg *rest.Config, opts Options, serving *certs.Certs) error {
	if err := serving.SetupWithManager(o.mgr); err != nil {
		return fmt.Errorf("webhook certificates: %w", err)
	}
	router := &attribution.Router{Book: o.book, Elected: o.mgr.Elected(), Metrics: o.attrMetrics, Log: o.log.WithName("attribution")}
	if opts.LeaderElect && opts.advertiseAddress() != "" {
		leader := &attribution.LeaseLeader{Reader: o.mgr.GetAPIReader(), Lease: types.NamespacedName{Namespace: opts.leaderNamespace(), Name: leaderElectionID}}
		router.Forwarder = &attribution.Forwarder{Leader: &replica.Leader{Own: cachedKeyPair(servingCertDir(opts)), Address: leader.Address, Forget: leader.Forget}}
	}
	var err error
	if o.watchedChanged, err = setupWebhooks(ctx, o.mgr, cfg, opts, o.writer, router, o.watcher); err != nil {
		return fmt.Errorf("setting up the admission webhooks: %w", err)
	}
	return nil
}

// deletedNamespaceMemory is how long a deleted namespace's labels are kept for the deletes
// of its objects handled after it.
const deletedNamespaceMemory = 10 * time.Minute

// credentialsLookupTimeout bounds the writer's question whether a Secret is a GitProvider's
// credentials: it is asked under its branch worker's lock, and a cache that cannot answer
// must fail the window (retried with backoff), not hold every target of the branch.
const credentialsLookupTimeout = 10 * time.Second

// ruleKeys lists the watcher.RuleKey of every WatchRule and ClusterWatchRule in the cache,
// for the watcher to tell when a new leader has registered them all (watcher.Options).
func ruleKeys(c client.Reader) func() ([]string, bool) {
	return func() ([]string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), credentialsLookupTimeout)
		defer cancel()
		var rules v1alpha1.WatchRuleList
		var clusterRules v1alpha1.ClusterWatchRuleList
		if c.List(ctx, &rules) != nil || c.List(ctx, &clusterRules) != nil {
			return nil, false
		}
		keys := make([]string, 0, len(rules.Items)+len(clusterRules.Items))
		for _, r := range rules.Items {
			keys = append(keys, watcher.RuleKey("WatchRule", r.Namespace, r.Name))
		}
		for _, r := range clusterRules.Items {
			keys = append(keys, watcher.RuleKey("ClusterWatchRule", "", r.Name))
		}
		return keys, true
	}
}

// followNamespaceLabels tells the watcher when a namespace's labels change, after the cache
// its namespace selectors read has them (objects there may join or leave their targets),
// and remembers the labels of deleted namespaces.
func followNamespaceLabels(ctx context.Context, cached ctrlcache.Cache, w *watcher.Watcher, deleted *watcher.DeletedNamespaces) error {
	inf, err := cached.GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("watching namespaces: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok {
				deleted.Forget(ns.Name) // created again: its own labels count
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.Namespace)
			after, ok2 := newObj.(*corev1.Namespace)
			if ok1 && ok2 && !maps.Equal(before.Labels, after.Labels) {
				w.NamespaceRelabelled(after.Name, before.Labels, after.Labels)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ns, ok := obj.(*corev1.Namespace); ok {
				deleted.Remember(ns.Name, ns.Labels)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching namespaces: %w", err)
	}
	return nil
}

// namespaceKnown says whether the cache holds a namespace (a cache read only: the writer
// asks under its lock).
func namespaceKnown(cached client.Reader) func(string) bool {
	return func(name string) bool {
		var ns corev1.Namespace
		return !apierrors.IsNotFound(cached.Get(context.Background(), types.NamespacedName{Name: name}, &ns))
	}
}

// resolverFunc breaks the construction cycle between the writer and the watcher.
type resolverFunc func() batch.Resolver

func (f resolverFunc) Current(t types.NamespacedName, k batch.ObjectKey) (*unstructured.Unstructured, error) {
	return f().Current(t, k)
}

// Holds implements batch.Holder when the resolver does.
func (f resolverFunc) Holds(t types.NamespacedName, k batch.ObjectKey) bool {
	h, ok := f().(batch.Holder)
	return ok && h.Holds(t, k)
}

// namespaceLabels reads a namespace's labels from the cache and, when live is set, from
// the API server for a namespace the cache has not seen yet (created a moment before the
// object, by the same kubectl apply), within a few seconds, and then, for a namespace
// deleted a short while ago, the labels it had: also when the API server could not answer
// (a timeout, throttling), since the deletes of a namespace's objects come in a burst just
// when it is busiest, and a delete judged without labels would be lost (known limit: a
// namespace deleted and created again with other labels within that memory, which the
// cache has not seen yet while the API server does not answer, is judged by the old
// labels). Unknown: nil.
func namespaceLabels(cached, live client.Reader, deleted *watcher.DeletedNamespaces) func(string) labels.Set {
	return func(name string) labels.Set {
		var ns corev1.Namespace
		key := types.NamespacedName{Name: name}
		err := cached.Get(context.Background(), key, &ns)
		if !apierrors.IsNotFound(err) || live == nil {
			if err != nil {
				return nil
			}
			return ns.Labels
		}
		ctx, cancel := context.WithTimeout(context.Background(), liveNamespaceTimeout)
		defer cancel()
		if err := live.Get(ctx, key, &ns); err == nil {
			return ns.Labels
		}
		l, _ := deleted.Labels(name) // gone for the API server too, or it could not say
		return l
	}
}

// liveNamespaceTimeout bounds the read of a namespace the cache has not seen.
const liveNamespaceTimeout = 5 * time.Second
