package webhook

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
	"github.com/gitops-reverser/gitops-reverser/watcher"
	"github.com/gitops-reverser/gitops-reverser/watcher/attribution"
)

// WatchedPath is where the watched-objects webhook is served.
const WatchedPath = "/validate/watched"

// Sensitivity says whether objects of a resource must be encrypted before reaching Git.
type Sensitivity func(schema.GroupResource) bool

// Watched judges writes to watched objects against the view.
type Watched struct {
	View      *View
	Sensitive Sensitivity
	// SensitiveResources are the operator's --sensitive-resources (Sensitive answers for
	// them too), which a relabel's rules may take through "*" (DecideRelabel).
	SensitiveResources []schema.GroupResource
	// WarnAlways adds the "where it lands" warning to every allowed request, not only dry-runs.
	WarnAlways bool
	Metrics    *Metrics
	// Noise skips cluster-made objects the watcher does not capture either, so the webhook
	// never blocks the cluster's own controllers.
	Noise watcher.Noise
	// Attribution records who made each admitted write, for the commit author (on the
	// leader, or forwarded to it); nil records nothing.
	Attribution *attribution.Router
	// KeepDefaultedFields is the writer's --keep-defaulted-fields: it decides which fields
	// of an update reach Git (nothingForGit).
	KeepDefaultedFields bool
}

// byCluster says whether username is kube-controller-manager, whose controllers delete for
// the cluster rather than for a person (a namespace terminating, the garbage collector's
// cascades, finished Jobs, expired tokens): under its own identity, or, with
// --use-service-account-credentials (kubeadm's default), under each controller's service
// account in kube-system (kubeControllerManagerAccount). Not any service account of
// kube-system: a CI job or a Helm controller may run as one. Pure.
func byCluster(username string) bool {
	if username == "system:kube-controller-manager" {
		return true
	}
	name, ok := strings.CutPrefix(username, "system:serviceaccount:kube-system:")
	return ok && kubeControllerManagerAccount(name)
}

// kubeControllerManagerAccount says whether name is the service account of one of
// kube-controller-manager's controllers (k8s.io/kubernetes cmd/kube-controller-manager,
// v1.37). Pure.
func kubeControllerManagerAccount(name string) bool {
	switch name {
	case "attachdetach-controller", "bootstrap-signer", "certificate-controller", "clusterrole-aggregation-controller",
		"cronjob-controller", "daemon-set-controller", "deployment-controller", "disruption-controller",
		"endpoint-controller", "endpointslice-controller", "endpointslicemirroring-controller", "ephemeral-volume-controller",
		"expand-controller", "generic-garbage-collector", "horizontal-pod-autoscaler", "job-controller",
		"legacy-service-account-token-cleaner", "namespace-controller", "node-controller", "persistent-volume-binder",
		"pod-garbage-collector", "pv-protection-controller", "pvc-protection-controller", "replicaset-controller",
		"replication-controller", "resource-claim-controller", "resourcequota-controller", "root-ca-cert-publisher",
		"service-account-controller", "statefulset-controller", "token-cleaner", "ttl-after-finished-controller",
		"ttl-controller":
		return true
	}
	return false
}

// requestOf reads what routing needs from an admission request: the Request, and the
// parts of the new and old objects decisions read (nil when absent).
func requestOf(req admission.Request) (Request, *partialMeta, *partialMeta, error) {
	r := Request{
		Operation: Operation(req.Operation),
		Resource:  schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource},
		Kind:      req.Kind.Kind,
		Namespace: objectNamespace(req.Resource.Group, req.Resource.Resource, req.Namespace),
		Name:      req.Name,
		DryRun:    req.DryRun != nil && *req.DryRun,
		ByCluster: byCluster(req.UserInfo.Username),
	}
	obj, err := decodeMeta(req.Object.Raw)
	if err != nil {
		return r, nil, nil, err
	}
	old, err := decodeMeta(req.OldObject.Raw)
	if err != nil {
		return r, nil, nil, err
	}
	if r.Name == "" && obj != nil {
		r.Name = obj.Metadata.Name
	}
	return r, obj, old, nil
}

// Handle implements admission.Handler.
func (w *Watched) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.SubResource != "" {
		return admission.Allowed("")
	}
	r, obj, old, err := requestOf(req)
	if err != nil {
		w.observe(Verdict{Reason: ReasonUndecodable, errored: true}, req.DryRun != nil && *req.DryRun, start)
		return admission.Errored(http.StatusBadRequest, err)
	}
	dry := r.DryRun
	if v := w.relabel(r, obj, old); !v.Allowed {
		w.observe(v, dry, start)
		return denied(v)
	}
	targets, judge, orphaned := w.route(ctx, r, obj, old, func() bool { return onlyOwnersChanged(req) })
	if !judge {
		w.observe(Verdict{Allowed: true, Reason: ReasonSkipped}, dry, start)
		if !dry && len(targets) > 0 {
			// Adopted: removed from Git like a deleted object, so the removal is authored by
			// who made this write. It is not judged: the cluster's controllers are never
			// blocked.
			w.record(ctx, req)
		}
		return admission.Allowed("")
	}
	w.locate(targets, r, req)
	w.inspect(&r, req, targets)
	v := Decide(r, targets, w.Sensitive(r.Resource), dry || w.WarnAlways)
	// An orphaned object is a creation for Git, whatever else the write left as it was.
	if updated := !v.Allowed && r.Operation == Update && !orphaned; updated && unchanged(req) {
		v = Verdict{Allowed: true, Reason: ReasonUnchanged}
		w.observe(v, dry, start)
		return admission.Allowed("") // nothing stored, nothing to attribute
	} else if updated && nothingForGit(req, w.KeepDefaultedFields || w.anySensitive(r.Resource, targets)) {
		v = Verdict{Allowed: true, Reason: ReasonNothingForGit} // stored, and attributed below, as any write
	} else if !v.Allowed && deleteUnderway(req) {
		v = Verdict{Allowed: true, Reason: ReasonNothingForGit}
	}
	w.observe(v, dry, start)
	if !v.Allowed {
		return denied(v)
	}
	if !dry && len(targets) > 0 {
		w.record(ctx, req)
	}
	return admission.Allowed("").WithWarnings(v.Warnings...)
}

// denied is the answer to a denying verdict, its reason code in the status.
func denied(v Verdict) admission.Response {
	resp := admission.Denied(v.Message)
	resp.Result.Reason = metav1.StatusReason(v.Reason)
	return resp
}

// relabel judges what an update of a namespace's labels moves into or out of GitTargets
// (DecideRelabel); any other request, or one that moves nothing, is allowed here.
func (w *Watched) relabel(r Request, obj, old *partialMeta) Verdict {
	if r.Resource != namespacesResource || r.Operation != Update || obj == nil || old == nil {
		return Verdict{Allowed: true}
	}
	return DecideRelabel(r, w.View.Relabelled(r.Name, old.labels(), obj.labels()), w.SensitiveResources)
}

// namespacesResource is the core namespaces resource.
var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// unchanged reports whether an update stores nothing new: the object equals the stored one
// but for its resourceVersion, as with a server-side apply or a PUT that changes nothing.
// The API server then writes nothing and the watcher sees no event, so Git gets nothing and
// there is nothing to deny: a pipeline that re-applies everything is not stopped by a
// target it changes nothing for. Called only before a denial, so allowed writes pay nothing.
func unchanged(req admission.Request) bool {
	if bytes.Equal(req.Object.Raw, req.OldObject.Raw) {
		return true
	}
	return sameButVersion(decodeFull(req.Object.Raw), decodeFull(req.OldObject.Raw))
}

// sameButVersion reports whether obj equals old but for its resourceVersion; both are left
// as they were.
func sameButVersion(obj, old *unstructured.Unstructured) bool {
	if obj == nil || old == nil {
		return false
	}
	objVersion, oldVersion := obj.GetResourceVersion(), old.GetResourceVersion()
	defer func() {
		obj.SetResourceVersion(objVersion)
		old.SetResourceVersion(oldVersion)
	}()
	obj.SetResourceVersion("")
	old.SetResourceVersion("")
	return reflect.DeepEqual(obj.Object, old.Object)
}

// nothingForGit reports whether an update leaves what the writer would commit as it was
// (sanitize.SameWritten), so that a denial would block a write that never reaches Git.
// Called only before a denial.
func nothingForGit(req admission.Request, whole bool) bool {
	return sanitize.SameWritten(decodeFull(req.OldObject.Raw), decodeFull(req.Object.Raw), whole)
}

// route finds the targets whose folders a write changes, as the watcher will see it, and
// whether it is judged. A write the noise rules skip is not; its targets are those that
// lose the object when it is adopted (gains a controller), none otherwise. An orphaned
// object (it loses its controller) arrives in Git as if created, and is not judged either
// when the write changes nothing else (ownersOnly): the garbage collector orphaning a
// deleted owner's dependents (--cascade=orphan) must never be denied, or the owner waits on
// its finalizer for ever; the writer refuses what it cannot write (never in plaintext), and
// status says so. One that changes more is judged as a creation, so that no one stores
// unjudged content by giving an object a controller first (orphaned: none of what the
// write left as it was then counts for it).
func (w *Watched) route(ctx context.Context, r Request, obj, old *partialMeta, ownersOnly func() bool) (targets []TargetState, judge, orphaned bool) {
	if w.isNoise(r, obj, old) {
		if obj != nil && old != nil && !w.isNoise(r, old) {
			return w.View.Targets(ctx, adopted(r), nil, old.labels()), false, false
		}
		return nil, false, false
	}
	if old != nil && w.isNoise(r, old) {
		return w.View.Targets(ctx, r, obj.labels(), nil), !ownersOnly(), true
	}
	return w.View.Targets(ctx, r, obj.labels(), old.labels()), true, false
}

// onlyOwnersChanged reports whether an update changes nothing of the object but its owner
// references (and what the API server keeps with every write: managedFields, the
// resourceVersion), as the garbage collector's orphaning patch does.
func onlyOwnersChanged(req admission.Request) bool {
	obj, old := decodeFull(req.Object.Raw), decodeFull(req.OldObject.Raw)
	if obj == nil || old == nil {
		return false
	}
	for _, u := range []*unstructured.Unstructured{obj, old} {
		u.SetOwnerReferences(nil)
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
	}
	return reflect.DeepEqual(obj.Object, old.Object)
}

// adopted turns the update that makes an object noise (it gains a controller) into what it
// is for Git, a delete: the watcher removes it under the rules that capture deletes and
// selected it before.
func adopted(r Request) Request {
	r.Operation = Delete
	return r
}

// RecordedPath is where the recorded entry (RecordedWebhookName) is served.
const RecordedPath = "/record/skipped"

// Recorded serves the recorded entry: it records who made a write the watched entry skips
// (a GitOps controller's), when a target captures the object, and never judges it. Without
// it, such a change would be committed under the committer, or, worse, joined to an earlier
// request for the same object that another admission step then denied.
type Recorded struct {
	Watched *Watched
}

// Handle implements admission.Handler: always allowed.
func (h *Recorded) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.DryRun != nil && *req.DryRun {
		return admission.Allowed("")
	}
	if req.SubResource == ScaleSubresource {
		h.Watched.recordScale(ctx, req)
		return admission.Allowed("")
	}
	if req.SubResource != "" {
		return admission.Allowed("")
	}
	r, obj, old, err := requestOf(req)
	if err != nil {
		return admission.Allowed("")
	}
	if targets, _, _ := h.Watched.route(ctx, r, obj, old, func() bool { return true }); len(targets) > 0 { // judged or not, recorded
		h.Watched.record(ctx, req)
	}
	return admission.Allowed("")
}

// deleteUnderway reports whether req deletes an object whose deletion was already asked
// for and admitted (it has a deletionTimestamp): the kubelet's final delete of a pod once
// its containers stopped, or a delete run again. Its intent was judged then; denying this
// one, because the target turned Stalled during the grace period, would only leave the
// object terminating, and change nothing for Git.
func deleteUnderway(req admission.Request) bool {
	if req.Operation != admissionv1.Delete {
		return false
	}
	old := decodeFull(req.OldObject.Raw)
	return old != nil && old.GetDeletionTimestamp() != nil
}

// record remembers who asked for an admitted write so the watcher can author its commit.
// A request that cannot be keyed is simply not recorded: its change is committed under the
// committer identity, never under a guess.
func (w *Watched) record(ctx context.Context, req admission.Request) {
	if w.Attribution == nil {
		return
	}
	obj, old := decodeFull(req.Object.Raw), decodeFull(req.OldObject.Raw)
	if req.Operation == admissionv1.Delete && old != nil && old.GetDeletionTimestamp() != nil &&
		strings.HasPrefix(req.UserInfo.Username, nodeUserPrefix) {
		// The kubelet finishing a pod's graceful deletion once its containers stopped: the
		// delete is whoever asked for it, whose record it would make ambiguous.
		return
	}
	if req.Operation == admissionv1.Update && sameButVersion(obj, old) {
		// Stored as nothing: no event will use the record up, and it would take a place in
		// the book, or make a later write from the same version ambiguous.
		return
	}
	if k, ok := attribution.KeyForRequest(attribution.Op(req.Operation), obj, old); ok {
		w.Attribution.Record(ctx, k, attribution.Author{Username: req.UserInfo.Username})
	}
}

// nodeUserPrefix starts the username of a kubelet (the Node authorizer's system:node:<name>).
const nodeUserPrefix = "system:node:"

// ScaleSubresource is the subresource kubectl scale and HorizontalPodAutoscalers write
// through: the recorded entry takes its updates (ScaleRules), so that a change of replicas
// is authored by who asked for it, not committed under the committer.
const ScaleSubresource = "scale"

// recordScale remembers who changed an object's replicas through its scale subresource.
// The request holds Scales (whose metadata is the object's UID and version), not the
// object, so the record is keyed by the version it replaced and the replicas it set
// (attribution.ScaleKey); one that keeps the replicas stores nothing and is not recorded.
// Nor can it be routed (a Scale has no labels): every scale of a watched resource in a
// watched namespace is recorded, and one no rule selects expires unjoined.
func (w *Watched) recordScale(ctx context.Context, req admission.Request) {
	if w.Attribution == nil || req.Operation != admissionv1.Update {
		return
	}
	obj, old := decodeFull(req.Object.Raw), decodeFull(req.OldObject.Raw)
	if obj == nil || old == nil || old.GetUID() == "" || old.GetResourceVersion() == "" {
		return
	}
	replicas := attribution.ReplicasOf(obj)
	if replicas == attribution.ReplicasOf(old) {
		return
	}
	k := attribution.ScaleKey(old.GetUID(), old.GetResourceVersion(), replicas)
	w.Attribution.Record(ctx, k, attribution.Author{Username: req.UserInfo.Username})
}

// locate fills in where the object would land in each target: where the leader's writer
// says (asked by the other replicas), else, for a target it does not know or when the
// leader cannot be asked, the canonical path.
func (w *Watched) locate(targets []TargetState, r Request, req admission.Request) {
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	for i := range targets {
		t := &targets[i]
		if w.View.Locator != nil {
			at := w.View.Locator.Locate(t.Key, gvr, r.Kind, r.Namespace, r.Name)
			t.Path, t.PathProblem, t.Encrypted = at.Path, at.Problem, at.Encrypted
			t.Absent, t.RemovalProblem = at.Absent, at.RemovalProblem
			if t.Path != "" || t.PathProblem != "" {
				continue
			}
		}
		sensitive := w.Sensitive(r.Resource) || slices.Contains(t.SensitiveResources, r.Resource)
		t.Path, t.PathProblem = CanonicalLocation(t.Folder, gvr, r.Namespace, r.Name, sensitive)
	}
}

// inspect fills what the verdict needs from the whole object, decoding it only when it
// matters: whether a Secret is key material (the old object on DELETE) or a GitProvider's
// credentials, which the writer skips alike, which fields a sensitive object would leave
// readable, and whether a GitProvider's URL carries credentials.
func (w *Watched) inspect(r *Request, req admission.Request, targets []TargetState) {
	secret := r.Resource == schema.GroupResource{Resource: "secrets"}
	provider := r.Resource == batch.GitProviders && r.Operation != Delete
	sensitive := r.Operation != Delete && w.anySensitive(r.Resource, targets)
	if len(targets) == 0 || (!secret && !sensitive && !provider) {
		return
	}
	raw := req.Object.Raw
	if r.Operation == Delete {
		raw = req.OldObject.Raw
	}
	full := decodeFull(raw)
	if full == nil {
		return
	}
	r.KeyMaterial = secret && (batch.HoldsKeyMaterial(full) ||
		w.View.KeptOutOfGit(types.NamespacedName{Namespace: r.Namespace, Name: r.Name}))
	if sensitive {
		r.ReadableFields = batch.ReadableFields(full)
	}
	if provider {
		r.CredentialsProblem = batch.URLCredentialsProblem(r.Resource, full)
	}
}

// anySensitive reports whether any of the targets writes the object encrypted: its
// resource is sensitive there, or its document there is encrypted in Git (located first).
func (w *Watched) anySensitive(gr schema.GroupResource, targets []TargetState) bool {
	if w.Sensitive(gr) {
		return true
	}
	for _, t := range targets {
		if t.Encrypted || slices.Contains(t.SensitiveResources, gr) {
			return true
		}
	}
	return false
}

func (w *Watched) observe(v Verdict, dry bool, start time.Time) {
	if w.Metrics == nil {
		return
	}
	verdict := "allowed"
	switch {
	case v.errored:
		verdict = "errored"
	case !v.Allowed:
		verdict = "denied"
	}
	w.Metrics.Verdicts.WithLabelValues(verdict, v.Reason, strconv.FormatBool(dry)).Inc()
	w.Metrics.Latency.Observe(time.Since(start).Seconds())
}

// isNoise applies the watcher's noise rules to the stored (or, for deletes, old) object:
// the first of objs that is present.
func (w *Watched) isNoise(r Request, objs ...*partialMeta) bool {
	for _, m := range objs {
		if m == nil {
			continue
		}
		skip, _ := w.Noise.Skip(watcher.ObjectFacts{Resource: r.Resource, Name: r.Name, SecretType: m.secretType(), Owners: m.Metadata.OwnerReferences})
		return skip
	}
	return false
}

// decodeMeta decodes the parts of a raw object a decision needs; nil for an absent object.
func decodeMeta(raw []byte) (*partialMeta, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	m := &partialMeta{}
	if err := m.unmarshal(raw); err != nil {
		return nil, err
	}
	return m, nil
}

// labels returns the object's labels, empty for an object without any, nil for no object.
func (m *partialMeta) labels() labels.Set {
	if m == nil {
		return nil
	}
	if m.Metadata.Labels == nil {
		return labels.Set{}
	}
	return m.Metadata.Labels
}

// objectNamespace is the namespace of the object a request is about: the API server puts a
// Namespace's own name in request.namespace (kubernetes/kubernetes#95012), but a Namespace
// is cluster-scoped, and is routed and located as such.
func objectNamespace(group, resource, requestNamespace string) string {
	if group == "" && resource == "namespaces" {
		return ""
	}
	return requestNamespace
}
