package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gitops-reverser/gitops-reverser/certs"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	gitopsctrl "github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/watcher"
)

// Options are the manager's flags.
type Options struct {
	MetricsAddr           string
	ProbeAddr             string
	PprofAddr             string
	CompactLooseObjects   int
	LeaderElect           bool
	LeaderElectionNS      string
	WorkDir               string
	GitPollInterval       time.Duration
	ProviderCheckInterval time.Duration
	GitTimeout            time.Duration
	Concurrent            int

	Namespace         string
	WebhookHost       string
	WebhookPort       int
	WebhookCertDir    string
	WebhookConfigName string
	// MutatingWebhookConfigName names the MutatingWebhookConfiguration that stamps
	// CommitRequest requesters (the operator only injects its caBundle).
	MutatingWebhookConfigName string
	WebhookFailure            string
	WebhookTimeout            int
	WebhookWarnAlways         bool
	WebhookSkipUsers          stringList
	WebhookSkipManagers       stringList
	SensitiveResources        stringList
	AuthorEmailDomain         string
	// AdvertiseAddress is where other replicas forward attribution records to this one.
	AdvertiseAddress string
	// KeepDefaultedFields writes fields no field manager owns (server defaults) too.
	KeepDefaultedFields bool
	// Noise says which cluster-made objects are captured after all.
	Noise watcher.Noise
	// Certs configures the webhook serving certificate (self-managed or cert-manager).
	Certs certs.Options
}

// defaultSkipUsers are GitOps controllers that apply from Git: judging (and mirroring
// attribution for) their writes would loop Git back into Git.
func defaultSkipUsers() stringList {
	return stringList{
		"system:serviceaccount:flux-system:kustomize-controller",
		"system:serviceaccount:flux-system:helm-controller",
		"system:serviceaccount:argocd:argocd-application-controller",
	}
}

// defaultSkipFieldManagers are the field managers those controllers write with.
func defaultSkipFieldManagers() stringList {
	return stringList{"kustomize-controller", "helm-controller", "argocd-controller"}
}

func (o *Options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof/ profiling endpoints, for diagnosing CPU and memory use; empty (the default) or 0 disables them.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader so that only one replica watches and writes to Git.")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: --namespace).")
	fs.StringVar(&o.WorkDir, "work-dir", defaultWorkDir(), "Directory for the persistent local clones (a cache; the remote is the truth).")
	fs.IntVar(&o.CompactLooseObjects, "clone-compaction-loose-objects", repo.DefaultCompactLooseObjects, "Loose objects in a local clone that make the writer compact it to the branch tip after a push or a fetch (git gc --auto's threshold); 0 never compacts on that count.")
	fs.DurationVar(&o.GitPollInterval, "git-poll-interval", defaultGitPollInterval, "How often each branch is fetched to notice changes pushed by others. Not positive: the default.")
	fs.DurationVar(&o.GitTimeout, "git-timeout", batch.DefaultGitTimeout, "Longest one fetch, push or reachability check of a Git remote may take; a server that stops answering fails that attempt (retried with backoff) instead of holding its branch's writer. It bounds the whole operation: raise it if a first fetch of a very large repository needs longer. Not positive: the default.")
	fs.IntVar(&o.Concurrent, "concurrent", gitopsctrl.DefaultConcurrent, "How many GitTargets, and how many GitProviders, are reconciled at once: each may wait on its Git remote up to --git-timeout. Not positive: the default.")
	fs.DurationVar(&o.ProviderCheckInterval, "provider-check-interval", defaultProviderCheckInterval, "How often a healthy GitProvider's repository is checked for reachability. Not positive: the default.")
	fs.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "The operator's own namespace (default $POD_NAMESPACE); excluded from the watched-objects webhook.")
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "Address the webhook server binds to (default: all).")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port of the admission webhook server; 0 disables the webhooks.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "Directory with tls.crt and tls.key for the webhook server (default: controller-runtime's).")
	fs.StringVar(&o.WebhookConfigName, "webhook-configuration-name", "gitops-reverser", "ValidatingWebhookConfiguration whose watched-objects rules the operator keeps in step (never its clientConfig).")
	fs.StringVar(&o.MutatingWebhookConfigName, "mutating-webhook-configuration-name", "gitops-reverser", "MutatingWebhookConfiguration holding the CommitRequest requester webhook; with --webhook-cert-mode=self-managed the operator injects its CA into it.")
	fs.StringVar(&o.WebhookFailure, "webhook-failure-policy", "Ignore", "failurePolicy of the watched-objects webhook: Ignore (an operator outage never blocks the cluster; the writer still refuses what it cannot write) or Fail (strict: nothing unjudged is stored).")
	fs.IntVar(&o.WebhookTimeout, "webhook-timeout-seconds", 3, "timeoutSeconds of the watched-objects webhook.")
	fs.BoolVar(&o.WebhookWarnAlways, "webhook-warn-always", false, "Add the 'where it lands' warning to every allowed request, not only to dry-runs.")
	o.WebhookSkipUsers = defaultSkipUsers()
	o.WebhookSkipManagers = defaultSkipFieldManagers()
	fs.Var(&listFlag{list: &o.WebhookSkipManagers}, "webhook-skip-field-managers", "Comma-separated field managers whose writes by a service account never reach the watched-objects webhook.")
	fs.Var(&listFlag{list: &o.WebhookSkipUsers}, "webhook-skip-users", "Comma-separated usernames whose writes never reach the watched-objects webhook (the operator's own identity is always added).")
	o.Certs.BindFlags(fs)
	fs.BoolVar(&o.Noise.CaptureKubeRootCA, "capture-kube-root-ca", false, "Capture the kube-root-ca.crt ConfigMap the cluster publishes in every namespace.")
	fs.BoolVar(&o.Noise.CaptureServiceAccountTokens, "capture-service-account-tokens", false, "Capture Secrets of type kubernetes.io/service-account-token.")
	fs.BoolVar(&o.Noise.CaptureOwned, "capture-owned-objects", false, "Capture objects with a controller ownerReference (ReplicaSets of Deployments, Jobs of CronJobs, …).")
	fs.StringVar(&o.AdvertiseAddress, "advertise-address", "", "host:port where the other replicas reach this one's webhook server to forward attribution records while it leads (default $POD_IP:<webhook-port>; empty: records made on other replicas are not forwarded).")
	fs.StringVar(&o.AuthorEmailDomain, "author-email-domain", batch.DefaultAuthorEmailDomain, "Domain that completes a commit author's e-mail when the Kubernetes username is not an address (alice → alice@<domain>).")
	fs.BoolVar(&o.KeepDefaultedFields, "keep-defaulted-fields", false, "Write every field of a captured object, also those no field manager owns (server defaults such as dnsPolicy); by default they are left out of Git unless the file already has them.")
	fs.Var(&listFlag{list: &o.SensitiveResources}, "sensitive-resources", "Comma-separated resource.group names (besides core secrets) that must never reach Git in plaintext, e.g. sealedsecrets.bitnami.com; repeatable.")
}

// compactLooseObjects is the writer's CompactLooseObjects: the flag's 0 ("never") is the
// writer's negative.
func (o *Options) compactLooseObjects() int {
	if o.CompactLooseObjects <= 0 {
		return -1
	}
	return o.CompactLooseObjects
}

// The intervals of the periodic checks. Zero would not mean "never" but "at once, never
// again": a controller's RequeueAfter of 0 requeues nothing.
const (
	defaultGitPollInterval       = time.Minute
	defaultProviderCheckInterval = 5 * time.Minute
)

// positiveOr is d, or def when d is not positive: an interval or bound of 0 (or less)
// would turn a periodic check, or a bound, off without a word.
func positiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// check refuses, before anything starts, flag values the operator could not run with. The
// webhook flags are checked also when --webhook-port is 0, so that a value refused later,
// once the webhooks are turned on, is not a surprise then.
func (o *Options) check() error {
	if err := o.checkSensitive(); err != nil {
		return err
	}
	if _, err := o.failurePolicy(); err != nil {
		return err
	}
	if _, err := o.webhookTimeout(); err != nil {
		return err
	}
	return o.checkPlaces()
}

// checkPlaces refuses the addresses, namespace and directory the operator could not run
// with, naming the flag: each would otherwise fail later, or never, without a word.
func (o *Options) checkPlaces() error {
	switch {
	case o.WebhookPort < 0 || o.WebhookPort > 65535:
		// controller-runtime takes a negative port for "no server" and reports ready:
		// the webhooks would be registered and fail closed.
		return fmt.Errorf("--webhook-port must be 0 (webhooks off) or a port from 1 to 65535, not %d", o.WebhookPort)
	case o.Namespace == "" && o.WebhookPort != 0:
		return errors.New("--namespace (or $POD_NAMESPACE) is empty: the webhooks' certificate and Service live " +
			"in the operator's namespace; set it, or turn the webhooks off with --webhook-port=0")
	case o.Namespace == "" && o.LeaderElectionNS == "" && o.LeaderElect:
		return errors.New("--namespace (or $POD_NAMESPACE) is empty: --leader-elect needs a namespace for its " +
			"Lease; set it, or --leader-election-namespace")
	case o.WorkDir == "":
		return errors.New("--work-dir is empty: the clones and the journal of pending deletions need a directory")
	}
	if err := checkAdvertiseAddress(o.AdvertiseAddress); err != nil {
		return err
	}
	return o.checkNames()
}

// checkAdvertiseAddress refuses an --advertise-address (addr) the other replicas could not
// reach this one at: one without a host (":9443" would have each replica send the records
// to itself, the leader never getting them) or without a port from 1 to 65535. Empty is
// allowed: nothing is forwarded. Pure.
func checkAdvertiseAddress(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return fmt.Errorf("--advertise-address must be host:port with a port from 1 to 65535 (where the other "+
			"replicas reach this one's webhook server), not %q", addr)
	}
	return nil
}

// checkNames refuses a namespace or webhook configuration name the API server could never
// hold: the operator would start, and then fail at every try without stopping (the
// webhooks' rules never kept, nothing judged).
func (o *Options) checkNames() error {
	if o.Namespace != "" {
		if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
			return fmt.Errorf("--namespace (or $POD_NAMESPACE) %q is not a namespace name: %s", o.Namespace, strings.Join(errs, "; "))
		}
	}
	if o.WebhookConfigName == "" {
		return errors.New("--webhook-configuration-name is empty: the leader keeps the watched resources' rules " +
			"in that ValidatingWebhookConfiguration (default gitops-reverser)")
	}
	if errs := validation.IsDNS1123Subdomain(o.WebhookConfigName); len(errs) > 0 {
		return fmt.Errorf("--webhook-configuration-name %q is not the name of a ValidatingWebhookConfiguration "+
			"(the leader keeps the watched resources' rules in it): %s", o.WebhookConfigName, strings.Join(errs, "; "))
	}
	if o.MutatingWebhookConfigName != "" {
		if errs := validation.IsDNS1123Subdomain(o.MutatingWebhookConfigName); len(errs) > 0 {
			return fmt.Errorf("--mutating-webhook-configuration-name %q is not the name of a "+
				"MutatingWebhookConfiguration: %s", o.MutatingWebhookConfigName, strings.Join(errs, "; "))
		}
	}
	return nil
}

// gitTimeout is --git-timeout, with its default for a value that is not positive (no
// remote operation goes unbounded).
func (o *Options) gitTimeout() time.Duration {
	return positiveOr(o.GitTimeout, batch.DefaultGitTimeout)
}

func (o *Options) failurePolicy() (admissionv1.FailurePolicyType, error) {
	switch p := admissionv1.FailurePolicyType(o.WebhookFailure); p {
	case admissionv1.Ignore, admissionv1.Fail:
		return p, nil
	}
	return "", fmt.Errorf("--webhook-failure-policy must be Ignore or Fail, not %q", o.WebhookFailure)
}

// webhookTimeout is --webhook-timeout-seconds, checked against the API server's range: a
// value outside it would make every update of the webhook configuration fail, leaving the
// watched entry without rules (nothing judged) and only log lines to say so.
func (o *Options) webhookTimeout() (int32, error) {
	if o.WebhookTimeout < 1 || o.WebhookTimeout > 30 {
		return 0, fmt.Errorf("--webhook-timeout-seconds must be between 1 and 30 (the API server's limits), not %d", o.WebhookTimeout)
	}
	return int32(o.WebhookTimeout), nil
}

// checkSensitive refuses a --sensitive-resources name the API server could never serve (a
// resource that is not a DNS label, a group that is not a DNS subdomain: capitals, blanks,
// a slash, an empty label): it would match nothing, and objects meant to be encrypted
// would reach Git in plaintext without a word. A well-formed name of a resource not served
// (yet: its CRD installed later) is accepted.
func (o *Options) checkSensitive() error {
	for _, r := range o.SensitiveResources {
		gr := schema.ParseGroupResource(r)
		if len(validation.IsDNS1123Label(gr.Resource)) > 0 || (gr.Group != "" && len(validation.IsDNS1123Subdomain(gr.Group)) > 0) {
			return fmt.Errorf("--sensitive-resources: %q is not a resource name as the API server spells it: "+
				"plural, lowercase, resource.group (e.g. sealedsecrets.bitnami.com)", r)
		}
	}
	return nil
}

// sensitive says which resources must be encrypted: core Secrets always, plus the flag's.
func (o *Options) sensitive() func(schema.GroupResource) bool {
	extra := map[schema.GroupResource]bool{}
	for _, gr := range o.sensitiveResources() {
		extra[gr] = true
	}
	return func(gr schema.GroupResource) bool {
		return (gr.Group == "" && gr.Resource == "secrets") || extra[gr]
	}
}

// sensitiveResources is --sensitive-resources parsed.
func (o *Options) sensitiveResources() []schema.GroupResource {
	var grs []schema.GroupResource
	for _, r := range o.SensitiveResources {
		grs = append(grs, schema.ParseGroupResource(r))
	}
	return grs
}

func defaultWorkDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return d + "/gitops-reverser/clones"
	}
	return os.TempDir() + "/gitops-reverser/clones"
}

// stringList is a list flag's values.
type stringList []string

// listFlag binds a stringList to a comma-separated, repeatable flag: the first use replaces
// the default, later ones add to it. A chart rendering one flag per item must not keep only
// the last (for --sensitive-resources, that would write the others in plaintext).
type listFlag struct {
	list *stringList
	set  bool
}

func (f *listFlag) String() string {
	if f == nil || f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

func (f *listFlag) Set(v string) error {
	if !f.set {
		*f.list, f.set = nil, true
	}
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*f.list = append(*f.list, x)
		}
	}
	return nil
}
