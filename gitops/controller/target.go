package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gitops-reverser/gitops-reverser/api/status"
	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

const (
	providerRefIndex  = ".spec.providerRef.name"
	ageSecretRefIndex = ".spec.encryption.age.secretRef.name"
)

// Writer is the part of batch.Manager the GitTarget controller drives.
type Writer interface {
	EnsureTarget(ctx context.Context, spec batch.TargetSpec) (batch.TargetStatus, error)
	RemoveTarget(key types.NamespacedName)
	SuspendTarget(key types.NamespacedName, why string)
	KeepChanges(key types.NamespacedName)
}

// GitTargetReconciler resolves a target's provider and branch, hands the folder to the
// writer and reports the folder verdict and the last commit.
type GitTargetReconciler struct {
	Client client.Client
	Writer Writer
	// PollInterval is how often the remote is fetched to notice changes made by others
	// (a fixed folder, a moved branch).
	PollInterval time.Duration
	// StatusEvents carries the writer's "status changed" notices into this controller.
	StatusEvents <-chan event.TypedGenericEvent[*v1alpha1.GitTarget]
	// Recorder emits Events on GitTargets (a generated age identity); nil emits none.
	Recorder events.EventRecorder
	// Concurrent is how many are reconciled at once; not positive: DefaultConcurrent.
	Concurrent int
}

// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=gittargets,verbs=get;list;watch
// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=gittargets/status,verbs=get;update
// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=gittargets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the target, defers the status patch and reconciles it with the writer.
func (r *GitTargetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var t v1alpha1.GitTarget
	if err := r.Client.Get(ctx, req.NamespacedName, &t); err != nil {
		if apierrors.IsNotFound(err) {
			r.Writer.RemoveTarget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := t.Status.DeepCopy()
	defer func() {
		if err == nil { // a generation a passing error kept from its verdict is not observed yet
			t.Status.ObservedGeneration = t.Generation
		}
		res, err = status.Finish(ctx, res, err, status.Patch(ctx, r.Client, &t, before, &t.Status))
	}()
	return r.reconcile(ctx, &t)
}

func (r *GitTargetReconciler) reconcile(ctx context.Context, t *v1alpha1.GitTarget) (ctrl.Result, error) {
	conds := &t.Status.Conditions
	if !t.DeletionTimestamp.IsZero() {
		// Deleted, and kept only for finalizers (a foreground deletion waits for the digest
		// key Secret it owns): it stops writing as if gone, and makes no key Secret again
		// while the garbage collector deletes them.
		r.Writer.RemoveTarget(client.ObjectKeyFromObject(t))
		v1alpha1.SetReconciling(conds, t.Generation, v1alpha1.ReasonDeleting,
			fmt.Sprintf("being deleted, kept by finalizers %v: writes nothing more", t.Finalizers))
		return ctrl.Result{}, nil
	}
	// It exists: changes for it are kept until it registers, also while a transient error
	// or another registration delays that, and after a GitTarget of its name was deleted.
	r.Writer.KeepChanges(client.ObjectKeyFromObject(t))
	var p v1alpha1.GitProvider
	pkey := types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.ProviderRef.Name}
	if err := r.Client.Get(ctx, pkey, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return r.suspend(t, v1alpha1.ReasonProviderNotFound, fmt.Sprintf("GitProvider %s not found: create it or fix spec.providerRef", pkey))
		}
		return retrying(conds, t.Generation, fmt.Errorf("reading GitProvider %s: %w", pkey, err))
	}
	t.Status.Repository = repo.Redact(p.Spec.URL)
	if reason, msg := placeProblem(t, &p); reason != "" {
		return r.suspend(t, reason, msg)
	}
	if err := r.folderHolder(ctx, t, &p); err != nil {
		if errors.Is(err, batch.ErrFolderOverlap) {
			return r.overlapping(t, err)
		}
		return retrying(conds, t.Generation, err)
	}
	// Before the credentials: their grace period (Reconciling, admission letting changes
	// through) must not hide a template that keeps the target from writing at all.
	messages, err := batch.ParseMessages(t.Spec.CommitMessage.Single, t.Spec.CommitMessage.Group)
	if err != nil {
		// Never writes with the templates of an older generation.
		return r.suspend(t, v1alpha1.ReasonInvalidTemplate, fmt.Sprintf("spec.commitMessage: %v", err))
	}
	auth, authVersion, err := ProviderAuth(ctx, r.Client, &p)
	if errors.Is(err, ErrCredentials) {
		return r.credentialsUnusable(t, fmt.Sprintf("GitProvider %s: %v", pkey, err))
	}
	if err != nil {
		return retrying(conds, t.Generation, fmt.Errorf("GitProvider %s: %w", pkey, err))
	}
	return r.register(ctx, t, &p, providerAccess{auth: auth, version: authVersion}, messages)
}

// providerAccess is a GitProvider's credentials as the writer takes them: the auth method
// and the version of the Secret it was built from.
type providerAccess struct {
	auth    transport.AuthMethod
	version string
}

// register hands the writer t's spec on its GitProvider p, with p's credentials and t's
// parsed templates, and reports what the writer found of the branch and folder: suspended
// on a URL that cannot be used, Reconciling while the remote cannot be reached.
func (r *GitTargetReconciler) register(ctx context.Context, t *v1alpha1.GitTarget, p *v1alpha1.GitProvider, access providerAccess, messages batch.Messages) (ctrl.Result, error) {
	conds := &t.Status.Conditions
	pkey := client.ObjectKeyFromObject(p)
	enc, ev, err := r.resolveEncryption(ctx, t, p)
	if err != nil {
		return retrying(conds, t.Generation, err)
	}
	v1alpha1.SetCondition(conds, t.Generation, v1alpha1.ConditionEncryptionReady, ev.ready, ev.reason, ev.message)
	st, err := r.Writer.EnsureTarget(ctx, batch.TargetSpec{
		Key: client.ObjectKeyFromObject(t), URL: p.Spec.URL, Auth: access.auth, AuthVersion: access.version,
		Branch: t.Spec.Branch, Folder: t.Spec.Path, Window: WindowConfig(t.Spec.CommitWindow),
		Committer: committer(p), Messages: messages, Prune: t.Spec.Prune.Mode,
		Sensitive: sensitiveResources(t), Encryption: enc, Created: t.CreationTimestamp.Time,
	})
	applyWriterStatus(t, st)
	if errors.Is(err, batch.ErrFolderOverlap) { // a target the cache did not show yet
		return r.overlapping(t, err)
	}
	if errors.Is(err, repo.ErrOpaqueURL) { // the provider is Stalled for it: retrying cannot help
		// Suspending also settles what a move away left pending.
		return r.suspend(t, v1alpha1.ReasonProviderNotReady, fmt.Sprintf("GitProvider %s: %v", pkey, err))
	}
	if err != nil {
		setUnreachable(t, st, p.Spec.URL, err)
		return ctrl.Result{}, err
	}
	setWriterConditions(t, st, p.Spec.URL)
	return ctrl.Result{RequeueAfter: r.PollInterval}, nil
}

// placeProblem says why t cannot write where its spec points (a condition reason and
// message), or "" when it can: a branch or folder stored before the CRD's rules said so,
// or a branch its GitProvider does not allow. Pure.
func placeProblem(t *v1alpha1.GitTarget, p *v1alpha1.GitProvider) (reason, message string) {
	if err := repo.ValidBranch(t.Spec.Branch); err != nil {
		return v1alpha1.ReasonBranchNotAllowed, fmt.Sprintf("branch %q is not a valid Git branch name: "+
			"create a GitTarget on a valid branch (spec.branch is immutable)", t.Spec.Branch)
	}
	if err := plan.CheckFolder(t.Spec.Path); err != nil {
		return v1alpha1.ReasonPathNotAllowed, fmt.Sprintf("spec.path: %v: create a GitTarget for "+
			"another folder (spec.path is immutable)", err)
	}
	if !BranchAllowed(p, t.Spec.Branch) {
		return v1alpha1.ReasonBranchNotAllowed, fmt.Sprintf("branch %q is not in GitProvider %s allowedBranches %v%s: add a matching pattern there, "+
			"or create a GitTarget on an allowed branch (spec.branch is immutable)", t.Spec.Branch, client.ObjectKeyFromObject(p), p.Spec.AllowedBranches,
			malformedPatterns(p))
	}
	return "", ""
}

// credentialsUnusable reports credentials its GitProvider cannot give (msg says why). A
// Secret replaced by delete and create is missing for a moment: the writer goes on until
// the credentials stay unusable, so pending CommitRequests do not end for a rotation
// (Reconciling, not Stalled: admission denies changes routed to a Stalled target, and this
// one still writes them). After the grace, the writer's access is revoked, not only the
// status.
func (r *GitTargetReconciler) credentialsUnusable(t *v1alpha1.GitTarget, msg string) (ctrl.Result, error) {
	wait := credentialsGraceLeft(t.Status.Conditions, time.Now())
	if wait <= 0 {
		return r.suspend(t, v1alpha1.ReasonProviderNotReady, msg)
	}
	setCredentialsGrace(t, msg)
	return ctrl.Result{RequeueAfter: wait}, nil
}

// setCredentialsGrace reports t's credentials unusable for less than the grace (msg says
// why): Reconciling for its provider, counted from the first time. A folder Stalled for its
// content stays Stalled beside it, Reconciling then only recording when the grace began:
// admission denies by Stalled, and a credentials rotation does not change what stops the
// folder being written. Pure.
func setCredentialsGrace(t *v1alpha1.GitTarget, msg string) {
	conds := &t.Status.Conditions
	if c := apimeta.FindStatusCondition(*conds, v1alpha1.ConditionReconciling); c != nil && c.Reason != v1alpha1.ReasonProviderNotReady {
		apimeta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling) // the grace counts from now
	}
	if contentStalled(*conds) {
		v1alpha1.SetCondition(conds, t.Generation, v1alpha1.ConditionReconciling, true, v1alpha1.ReasonProviderNotReady, msg)
		return
	}
	v1alpha1.SetReconciling(conds, t.Generation, v1alpha1.ReasonProviderNotReady, msg)
}

// contentStalled reports whether conds hold a folder Stalled for its content, which only
// the writer's next look at the folder may clear. Pure.
func contentStalled(conds []metav1.Condition) bool {
	c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonUnsupportedContent
}

// setWriterConditions sets FolderReady and Ready, Reconciling or Stalled from what the
// writer reports of t, registered on url. Pure.
func setWriterConditions(t *v1alpha1.GitTarget, st batch.TargetStatus, url string) {
	conds, gen := &t.Status.Conditions, t.Generation
	switch {
	case !st.Verdict.Supported:
		msg := st.Verdict.Message() + " (the operator tries again on its own once Git changes)"
		v1alpha1.SetCondition(conds, gen, v1alpha1.ConditionFolderReady, false, v1alpha1.ReasonUnsupportedContent, msg)
		v1alpha1.SetStalled(conds, gen, v1alpha1.ReasonUnsupportedContent, msg)
	case st.LastError != "":
		v1alpha1.SetCondition(conds, gen, v1alpha1.ConditionFolderReady, true, v1alpha1.ReasonSucceeded, "folder can be written")
		v1alpha1.SetReconciling(conds, gen, v1alpha1.ReasonWriteFailed, "last write failed, retrying: "+st.LastError)
	default:
		v1alpha1.SetCondition(conds, gen, v1alpha1.ConditionFolderReady, true, v1alpha1.ReasonSucceeded, "folder can be written")
		reason, msg := v1alpha1.ReasonSucceeded, fmt.Sprintf("writing to %s branch %s folder %s", repo.Redact(url), t.Spec.Branch, t.Spec.Path)
		if len(st.Refused) > 0 {
			reason, msg = v1alpha1.ReasonObjectsRefused, msg+"; "+RefusedSummary(st.Refused)
		}
		if st.MessageFallback != "" {
			msg += "; " + st.MessageFallback
		}
		v1alpha1.SetReady(conds, gen, reason, msg)
	}
}

// setUnreachable reports that the writer could not reach t's branch on url (err), as
// Reconciling, unless its folder stands refused: a verdict the writer still holds (st), or,
// when it could not look at all (another push holding the branch, st unknown), the
// UnsupportedContent the status last had. Admission denies by Stalled, and what stops the
// folder being written has not changed because Git cannot be reached. Pure.
func setUnreachable(t *v1alpha1.GitTarget, st batch.TargetStatus, url string, err error) {
	conds := &t.Status.Conditions
	switch {
	case st.Known && !st.Verdict.Supported:
		setWriterConditions(t, st, url)
	case !st.Known && contentStalled(*conds):
		// Left as it is: the writer could not look, and nothing says the folder changed. The
		// credentials were usable this time: a grace that Reconciling recorded is over.
		apimeta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling)
	default:
		v1alpha1.SetReconciling(conds, t.Generation, v1alpha1.ReasonUnreachable,
			fmt.Sprintf("branch %s of %s: %v", t.Spec.Branch, repo.Redact(url), err))
	}
}

// refusedShown is how many refusals a Ready message spells out.
const refusedShown = 3

// RefusedSummary says which objects the writer refused and why (each refusal names its
// object and fix), the first refusedShown of them, and how many more. Pure.
func RefusedSummary(refused []string) string {
	shown := refused[:min(len(refused), refusedShown)]
	msg := fmt.Sprintf("%d object(s) not written: %s", len(refused), strings.Join(shown, "; "))
	if more := len(refused) - len(shown); more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return msg
}

// credentialsGrace is how long a GitProvider's credentials must stay unusable before the
// writer stops for its GitTargets.
const credentialsGrace = 10 * time.Second

// credentialsGraceLeft is how long the writer still goes on for a target whose credentials
// are unusable now, judged by how long it has been Reconciling for its provider (conds),
// or 0 once it is Stalled for it (the grace is over) or for anything that suspended its
// writer (a template, a branch, a missing provider): nothing goes on to be spared, and a
// grace would only say it does and let admission through. Only a folder Stalled for its
// content keeps its writer. Pure.
func credentialsGraceLeft(conds []metav1.Condition, now time.Time) time.Duration {
	if c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason != v1alpha1.ReasonUnsupportedContent {
		return 0
	}
	c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionReconciling)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonProviderNotReady {
		return credentialsGrace
	}
	return max(0, credentialsGrace-now.Sub(c.LastTransitionTime.Time))
}

// overlapping stops t, whose folder an older target keeps (batch.ErrFolderOverlap): Stalled
// until the other target goes, and looked at again each poll, since the other target's
// deletion does not reconcile this one.
func (r *GitTargetReconciler) overlapping(t *v1alpha1.GitTarget, err error) (ctrl.Result, error) {
	res, _ := r.suspend(t, v1alpha1.ReasonFolderOverlap, err.Error())
	res.RequeueAfter = r.PollInterval
	return res, nil
}

// suspend stops the writer for t, which keeps its pending changes for its return, and
// marks t Stalled with reason and msg; pending CommitRequests end quoting msg. A
// configuration error: nothing to retry until the configuration changes.
func (r *GitTargetReconciler) suspend(t *v1alpha1.GitTarget, reason, msg string) (ctrl.Result, error) {
	r.Writer.SuspendTarget(client.ObjectKeyFromObject(t), msg)
	v1alpha1.SetStalled(&t.Status.Conditions, t.Generation, reason, msg)
	return ctrl.Result{}, nil
}

func applyWriterStatus(t *v1alpha1.GitTarget, st batch.TargetStatus) {
	if !st.Known {
		return
	}
	t.Status.ObjectCount = int32(st.ObjectCount)
	t.Status.Orphans = int32(st.Orphans)
	switch {
	case st.BranchEmpty:
		t.Status.LastCommit = nil // the branch has no commit yet: the target moved to a new one
		return
	case st.LastCommit == plumbing.ZeroHash:
		return // not read: the last value stands
	}
	t.Status.LastCommit = &v1alpha1.CommitInfo{SHA: st.LastCommit.String(), Time: metav1.NewTime(st.LastCommitTime.Truncate(time.Second))}
}

// WindowConfig turns the API's commit window (defaults already applied by the API server)
// into the writer's.
func WindowConfig(w v1alpha1.CommitWindow) batch.WindowConfig {
	cfg := batch.WindowConfig{Quiet: 5 * time.Second, MaxDelay: 30 * time.Second, MaxChanges: 500}
	if w.Quiet != nil {
		cfg.Quiet = w.Quiet.Duration
	}
	if w.MaxDelay != nil {
		cfg.MaxDelay = w.MaxDelay.Duration
	}
	if w.MaxChanges != nil {
		cfg.MaxChanges = int(*w.MaxChanges)
	}
	return cfg
}

func committer(p *v1alpha1.GitProvider) batch.Identity {
	id := batch.Identity{Name: "GitOps Reverser", Email: "gitops-reverser@localhost"}
	if c := p.Spec.Committer; c != nil {
		if c.Name != "" {
			id.Name = c.Name
		}
		if c.Email != "" {
			id.Email = c.Email
		}
	}
	return id
}

// SetupWithManager watches targets, their providers, and the writer's status notices.
func (r *GitTargetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.GitTarget{}, providerRefIndex,
		func(o client.Object) []string { return []string{o.(*v1alpha1.GitTarget).Spec.ProviderRef.Name} }); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.GitTarget{}, ageSecretRefIndex, ageSecretName); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.GitTarget{}, builder.WithPredicates(status.OwnChanges())).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		// A provider's status (an Unreachable message quoting each dial error) is not what
		// its targets read: only its spec, labels and annotations requeue them.
		Watches(&v1alpha1.GitProvider{}, handler.EnqueueRequestsFromMapFunc(r.targetsForProvider),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.targetsForSecret), builder.OnlyMetadata).
		// A target deleted or pointed at another GitProvider may let a folder go.
		Watches(&v1alpha1.GitTarget{}, handler.EnqueueRequestsFromMapFunc(r.keptOut),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(retryOptions(r.Concurrent))
	if r.StatusEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.StatusEvents, &handler.TypedEnqueueRequestForObject[*v1alpha1.GitTarget]{}))
	}
	return b.Complete(r)
}

func (r *GitTargetReconciler) keptOut(ctx context.Context, o client.Object) []reconcile.Request {
	return KeptOut(ctx, r.Client, o)
}

// KeptOut lists the GitTargets besides changed that are Stalled for overlapping another's
// folder (FolderOverlap), in every namespace (one repository serves many): when a GitTarget
// is deleted or pointed at another GitProvider, the folder it held may be free, and they
// are looked at again now rather than at their next poll, each poll being a minute of
// admission denials. The writer tells them too once it lets the folder go (batch.Manager's
// shutOut), should they be looked at before it did.
func KeptOut(ctx context.Context, c client.Reader, changed client.Object) []reconcile.Request {
	var list v1alpha1.GitTargetList
	if err := c.List(ctx, &list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		t := &list.Items[i]
		stalled := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionStalled)
		_, isTarget := changed.(*v1alpha1.GitTarget) // a GitProvider may share a GitTarget's name
		if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1alpha1.ReasonFolderOverlap ||
			(isTarget && client.ObjectKeyFromObject(t) == client.ObjectKeyFromObject(changed)) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(t)})
	}
	return reqs
}

// targetsForProvider re-reconciles the targets of a GitProvider that changed, and those kept
// out of a folder (KeptOut): a GitProvider deleted and created again on another repository
// (its URL is immutable) moves the targets on it, which may free a folder they held in the
// old one, and no GitTarget's generation changes to say so.
func (r *GitTargetReconciler) targetsForProvider(ctx context.Context, o client.Object) []reconcile.Request {
	return append(r.targetsBy(ctx, o, providerRefIndex), KeptOut(ctx, r.Client, o)...)
}

// targetsForSecret re-reconciles the targets whose spec.encryption.age.secretRef names the
// Secret, so edited or deleted identities take effect at once, and the targets of the
// GitProviders whose spec.secretRef names it: rotated credentials reach the writer at once,
// not at the next poll (the provider's own status may not change, telling its targets
// nothing).
func (r *GitTargetReconciler) targetsForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := r.targetsBy(ctx, o, ageSecretRefIndex)
	var providers v1alpha1.GitProviderList
	if err := r.Client.List(ctx, &providers, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretRefIndex: o.GetName()}); err != nil {
		return reqs
	}
	for i := range providers.Items {
		reqs = append(reqs, r.targetsBy(ctx, &providers.Items[i], providerRefIndex)...)
	}
	return reqs
}

// ageSecretName indexes a target by the Secret holding its age identities.
func ageSecretName(o client.Object) []string {
	if e := o.(*v1alpha1.GitTarget).Spec.Encryption; e != nil && e.Age != nil && e.Age.SecretRef != nil {
		return []string{e.Age.SecretRef.Name}
	}
	return nil
}

// targetsBy lists the targets in o's namespace whose index field names o.
func (r *GitTargetReconciler) targetsBy(ctx context.Context, o client.Object, index string) []reconcile.Request {
	var list v1alpha1.GitTargetList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
	}
	return reqs
}
