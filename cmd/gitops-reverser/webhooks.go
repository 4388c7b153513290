package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/watcher"
	"github.com/gitops-reverser/gitops-reverser/watcher/attribution"
	"github.com/gitops-reverser/gitops-reverser/webhook"
)

// setupWebhooks registers the admission webhooks, the view they decide on, and the
// leader's sync of the watched-objects rules, which follow the resources w watches; the
// returned function asks for that sync when they change.
func setupWebhooks(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts Options, writer *batch.Manager,
	router *attribution.Router, w *watcher.Watcher) (func(), error) {
	policy, err := opts.failurePolicy()
	if err != nil {
		return nil, err
	}
	timeout, err := opts.webhookTimeout()
	if err != nil {
		return nil, err
	}
	self, err := whoAmI(ctx, cfg)
	if err != nil {
		return nil, err
	}
	log := ctrl.Log.WithName("webhook")
	view := admissionView(mgr, writer, router, log)
	excluded := []string{"kube-system", "kube-node-lease"}
	if opts.Namespace != "" {
		excluded = append(excluded, opts.Namespace)
	}
	sync := webhook.NewRuleSync(mgr.GetClient(), view, opts.WebhookConfigName, webhook.WebhookPolicy{
		ExcludedNamespaces: excluded,
		SkipUsers:          append([]string{self}, opts.WebhookSkipUsers...),
		SkipFieldManagers:  opts.WebhookSkipManagers,
		FailurePolicy:      policy,
		TimeoutSecond:      timeout,
		Self:               self,
		SkipOwned:          !opts.Noise.CaptureOwned,
	}, log)
	sync.Watched = w.Watched
	sync.Informers = mgr.GetCache()
	sync.Loaded = func() bool {
		keys, ok := view.RuleKeys()
		return ok && w.Registered(keys)
	}
	if err := registerHandlers(mgr, opts, view, writer, router, log); err != nil {
		return nil, err
	}
	if err := mgr.Add(view); err != nil {
		return nil, err
	}
	// Ready only once this replica can judge: serving TLS, with its view built.
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("admission-view", view.Ready); err != nil {
		return nil, err
	}
	return sync.Notify, mgr.Add(sync)
}

// admissionView is what the webhooks decide on: the rules and targets in the manager's
// cache, and where the writer would put an object, asked of the leader's writer on a
// follower (whose own knows no folders).
func admissionView(mgr ctrl.Manager, writer *batch.Manager, router *attribution.Router, log logr.Logger) *webhook.View {
	view := webhook.NewView(mgr.GetCache(), log)
	view.Live = mgr.GetAPIReader()
	view.Locator = writer
	if f := router.Forwarder; f != nil {
		view.Locator = &webhook.LeaderLocator{Local: writer, Elected: mgr.Elected(), Leader: f.Leader, Log: log.WithName("locate")}
	}
	return view
}

// registerHandlers serves the webhooks' paths: the watched objects (and their recorded
// twin), the leader's locate and attribution-record endpoints, the operator's own kinds,
// and the requester stamp on CommitRequests.
func registerHandlers(mgr ctrl.Manager, opts Options, view *webhook.View, writer *batch.Manager, router *attribution.Router, log logr.Logger) error {
	metrics, err := webhook.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	srv := mgr.GetWebhookServer()
	watched := &webhook.Watched{
		View: view, Sensitive: opts.sensitive(), SensitiveResources: opts.sensitiveResources(), WarnAlways: opts.WebhookWarnAlways, Metrics: metrics, Noise: opts.Noise,
		Attribution: router, KeepDefaultedFields: opts.KeepDefaultedFields,
	}
	// Until the view is built these answer 503, so the API server applies the entries'
	// failurePolicy (View.OnceBuilt).
	srv.Register(webhook.WatchedPath, view.OnceBuilt(&admission.Webhook{Handler: watched}))
	srv.Register(webhook.RecordedPath, view.OnceBuilt(&admission.Webhook{Handler: &webhook.Recorded{Watched: watched}}))
	srv.Register(webhook.LocatePath, &webhook.LocateServer{Locator: writer, Own: cachedKeyPair(servingCertDir(opts)), Elected: mgr.Elected(),
		Log: log.WithName("locate")})
	// Closed once the leader-only components stop, which a shutdown does before it stops the
	// webhook server: this replica then refuses records, which followers keep.
	resigned := make(chan struct{})
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		close(resigned)
		return nil
	})); err != nil {
		return err
	}
	srv.Register(attribution.RecordsPath, &attribution.Receiver{Book: router.Book, Own: cachedKeyPair(servingCertDir(opts)), Elected: mgr.Elected(),
		Resigned: resigned, Log: log.WithName("attribution")})
	srv.Register(webhook.OwnPath, &admission.Webhook{Handler: &webhook.Own{
		Client: mgr.GetCache(), Decoder: admission.NewDecoder(mgr.GetScheme()),
		Authorizer: webhook.SubjectAccessReviewer{Client: mgr.GetClient()}, SensitiveResources: opts.sensitiveResources(),
	}})
	srv.Register(webhook.RequesterPath, &admission.Webhook{Handler: webhook.StampRequester{}})
	return nil
}

// whoAmI asks the API server which user the operator is, so its own writes (status, key
// Secrets) skip the watched-objects webhook whatever the deployment calls its account.
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the API server who the operator is (SelfSubjectReview): %w", err)
	}
	return r.Status.UserInfo.Username, nil
}
