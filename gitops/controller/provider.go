// Package controller reconciles GitProviders and GitTargets: it resolves credentials,
// checks that repositories are reachable and hands folders to the Git writer.
package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitops-reverser/gitops-reverser/api/status"
	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// ErrCredentials marks a Secret that is missing or unusable: a configuration error.
var ErrCredentials = errors.New("credentials unusable")

const secretRefIndex = ".spec.secretRef.name"

// GitProviderReconciler checks that a repository is reachable with its credentials.
type GitProviderReconciler struct {
	Client client.Client
	// Interval between reachability checks of a healthy provider.
	Interval time.Duration
	// Timeout bounds one reachability check, so that a server that stops answering marks
	// the provider unreachable instead of holding a reconcile worker; 0 means none.
	Timeout time.Duration
	// Concurrent is how many are reconciled at once; not positive: DefaultConcurrent.
	Concurrent int
}

// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=gitproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=gitproviders/status,verbs=get;update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile fetches the provider, defers the status patch and checks reachability.
func (r *GitProviderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var p v1alpha1.GitProvider
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := p.Status.DeepCopy()
	defer func() {
		if err == nil { // a generation a passing error kept from its verdict is not observed yet
			p.Status.ObservedGeneration = p.Generation
		}
		res, err = status.Finish(ctx, res, err, status.Patch(ctx, r.Client, &p, before, &p.Status))
	}()
	p.Status.URL = repo.Redact(p.Spec.URL)

	auth, _, err := ProviderAuth(ctx, r.Client, &p)
	if err != nil {
		if errors.Is(err, ErrCredentials) {
			v1alpha1.SetStalled(&p.Status.Conditions, p.Generation, v1alpha1.ReasonInvalidSecret, err.Error())
			return ctrl.Result{}, nil
		}
		return retrying(&p.Status.Conditions, p.Generation, err)
	}
	if err := r.lsRemote(ctx, p.Spec.URL, auth); err != nil {
		if errors.Is(err, repo.ErrOpaqueURL) { // configuration: retrying cannot help
			v1alpha1.SetStalled(&p.Status.Conditions, p.Generation, v1alpha1.ReasonInvalidURL, err.Error())
			return ctrl.Result{}, nil
		}
		if repo.CredentialsRejected(err) { // configuration: a fix in the Secret or on the server; looked at again meanwhile
			v1alpha1.SetStalled(&p.Status.Conditions, p.Generation, v1alpha1.ReasonAccessDenied,
				fmt.Sprintf("repository %s refused access: %v", repo.Redact(p.Spec.URL), err))
			return ctrl.Result{RequeueAfter: r.Interval}, nil
		}
		v1alpha1.SetReconciling(&p.Status.Conditions, p.Generation, v1alpha1.ReasonUnreachable,
			fmt.Sprintf("repository %s is not reachable: %v", repo.Redact(p.Spec.URL), err))
		return ctrl.Result{}, fmt.Errorf("checking %s: %w", repo.Redact(p.Spec.URL), err)
	}
	v1alpha1.SetReady(&p.Status.Conditions, p.Generation, v1alpha1.ReasonSucceeded, fmt.Sprintf("repository %s is reachable", repo.Redact(p.Spec.URL)))
	return ctrl.Result{RequeueAfter: r.Interval}, nil
}

// ProviderAuth reads the provider's Secret and builds go-git credentials. A missing or
// malformed Secret wraps ErrCredentials; the message never contains secret values. version
// names what the credentials were built from (the provider's generation, the Secret's UID
// and resourceVersion), so the writer can tell new credentials from the same ones built
// again: SSH credentials hold a host-key callback, which no comparison sees into.
func ProviderAuth(ctx context.Context, c client.Client, p *v1alpha1.GitProvider) (auth transport.AuthMethod, version string, err error) {
	version = fmt.Sprintf("provider generation %d", p.Generation)
	if p.Spec.SecretRef == nil {
		auth, err := repo.AuthFromSecret(p.Spec.URL, nil)
		if err != nil { // e.g. SSH, which has no anonymous access: a configuration error
			return nil, "", fmt.Errorf("%w: %s needs spec.secretRef: %v", ErrCredentials, repo.Redact(p.Spec.URL), err)
		}
		return auth, version, nil
	}
	var s corev1.Secret
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.SecretRef.Name}
	if err := c.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("%w: Secret %s not found: create it, or fix spec.secretRef.name", ErrCredentials, key)
		}
		return nil, "", fmt.Errorf("reading Secret %s: %w", key, err)
	}
	auth, err = repo.AuthFromSecret(p.Spec.URL, s.Data)
	if err != nil && !errors.Is(err, repo.ErrInvalidSecret) && !errors.Is(err, repo.ErrNoKnownHosts) {
		// Not the Secret's fault (a temporary file for known_hosts that cannot be written):
		// retried with backoff, not reported as a Secret to fix.
		return nil, "", fmt.Errorf("building credentials from Secret %s: %w", key, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: Secret %s: %v", ErrCredentials, key, err)
	}
	if norm := repo.NormalizeURL(p.Spec.URL); auth == nil && (strings.HasPrefix(norm, "http://") || strings.HasPrefix(norm, "https://")) {
		// A Secret named for credentials that gives none (a token under another key) would
		// mean anonymous access, and a refusal blaming credentials that were never sent.
		return nil, "", fmt.Errorf("%w: Secret %s has no credentials for an http(s) repository: set %s and %s, or %s (it has %s)",
			ErrCredentials, key, repo.KeyUsername, repo.KeyPassword, repo.KeyBearerToken, keyNames(s.Data))
	}
	return auth, fmt.Sprintf("%s, Secret %s resourceVersion %s", version, s.UID, s.ResourceVersion), nil
}

// retrying returns err for backoff after a transient failure of a reconcile step, and
// reports it as Reconciling (reason Retrying, quoting err, which never holds secret values)
// where the status claimed Ready, or nothing yet: Ready must not go on claiming what the last
// successful reconcile saw. A Stalled or Reconciling verdict stays as it is: admission
// denies by Stalled, and a credentials grace counts from its Reconciling condition.
func retrying(conds *[]metav1.Condition, gen int64, err error) (ctrl.Result, error) {
	if !apimeta.IsStatusConditionTrue(*conds, v1alpha1.ConditionStalled) && !apimeta.IsStatusConditionTrue(*conds, v1alpha1.ConditionReconciling) {
		v1alpha1.SetReconciling(conds, gen, v1alpha1.ReasonRetrying, fmt.Sprintf("%v; retrying with backoff", err))
	}
	return ctrl.Result{}, err
}

// keyNames lists a Secret's data keys, never its values, for a message that says what to fix.
func keyNames(data map[string][]byte) string {
	if len(data) == 0 {
		return "no keys"
	}
	return "keys " + strings.Join(slices.Sorted(maps.Keys(data)), ", ")
}

// AllowedBranchesProblem names the allowedBranches patterns path.Match cannot read
// ("release-[0-9"): such a pattern matches no branch, and a person reading it would expect
// it to. Nil when every pattern reads. Pure.
func AllowedBranchesProblem(patterns []string) error {
	var bad []string
	for _, g := range patterns {
		if _, err := path.Match(g, ""); err != nil {
			bad = append(bad, strconv.Quote(g))
		}
	}
	switch len(bad) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("spec.allowedBranches: %s is not a valid pattern (%s)", bad[0], patternSyntax)
	}
	return fmt.Errorf("spec.allowedBranches: %s are not valid patterns (%s)", strings.Join(bad, ", "), patternSyntax)
}

// patternSyntax reminds of path.Match's syntax, for a pattern it cannot read.
const patternSyntax = `path.Match syntax: *, ?, [a-z], \ to escape; a [ needs its ]`

// malformedPatterns is AllowedBranchesProblem in parentheses after a space, for a message
// saying a branch is not allowed; "" when every pattern reads.
func malformedPatterns(p *v1alpha1.GitProvider) string {
	if err := AllowedBranchesProblem(p.Spec.AllowedBranches); err != nil {
		return fmt.Sprintf(" (%v)", err)
	}
	return ""
}

// BranchAllowed reports whether branch matches one of the provider's allowedBranches globs.
func BranchAllowed(p *v1alpha1.GitProvider, branch string) bool {
	patterns := p.Spec.AllowedBranches
	if len(patterns) == 0 {
		patterns = []string{"*"}
	}
	for _, g := range patterns {
		if ok, _ := path.Match(g, branch); ok || g == "*" || g == "**" {
			return true
		}
	}
	return false
}

// KeptOutOfGit reports whether the Secret key is one no GitTarget writes to Git, whichever
// rule routes it: some GitProvider names it as its credentials (spec.secretRef), or some
// GitTarget as its keys (v1alpha1.GitTarget.KeySecrets). Read from c, the manager's cache,
// with the indexes the reconcilers' SetupWithManager register (batch.Options.Credentials);
// when the cache cannot answer, the writer retries rather than guess.
func KeptOutOfGit(ctx context.Context, c client.Reader, key types.NamespacedName) (bool, error) {
	var providers v1alpha1.GitProviderList
	if err := c.List(ctx, &providers, client.InNamespace(key.Namespace), client.MatchingFields{secretRefIndex: key.Name}); err != nil {
		return false, fmt.Errorf("listing GitProviders: %w", err)
	}
	if len(providers.Items) > 0 {
		return true, nil
	}
	var targets v1alpha1.GitTargetList
	if err := c.List(ctx, &targets, client.InNamespace(key.Namespace), client.MatchingFields{ageSecretRefIndex: key.Name}); err != nil {
		return false, fmt.Errorf("listing GitTargets: %w", err)
	}
	if len(targets.Items) > 0 {
		return true, nil
	}
	name, digest := strings.CutSuffix(key.Name, DigestSecretSuffix)
	if !digest || name == "" {
		return false, nil
	}
	var t v1alpha1.GitTarget
	if err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, &t); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reading GitTarget %s/%s: %w", key.Namespace, name, err)
	}
	return t.Spec.Encryption != nil, nil
}

// SetupWithManager watches providers and the Secrets they reference.
func (r *GitProviderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.GitProvider{}, secretRefIndex,
		func(o client.Object) []string {
			if ref := o.(*v1alpha1.GitProvider).Spec.SecretRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.GitProvider{}, builder.WithPredicates(status.OwnChanges())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.providersForSecret), builder.OnlyMetadata).
		WithOptions(retryOptions(r.Concurrent)).
		Complete(r)
}

func (r *GitProviderReconciler) providersForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.GitProviderList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretRefIndex: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}

// lsRemote checks that the repository answers (repo.LsRemote), within Timeout.
func (r *GitProviderReconciler) lsRemote(ctx context.Context, url string, auth transport.AuthMethod) error {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	return repo.LsRemote(ctx, url, auth)
}
