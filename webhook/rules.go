package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/watcher"
)

// RuleSpec is one rule of the ValidatingWebhookConfiguration.
type RuleSpec = admissionv1.RuleWithOperations

// WatchedWebhookName is the webhook entry (inside the named configuration) whose rules the
// operator keeps equal to the watched resources.
const WatchedWebhookName = "watched.reverser.gitops.dev"

// RecordedWebhookName is the entry that only records who made the writes the watched entry
// skips (GitOps controllers, by user or field manager), so their changes are authored by
// them too, never by an earlier request for the same object. It never judges and fails
// open. Optional: a configuration without it records nothing for those writes.
const RecordedWebhookName = "recorded.reverser.gitops.dev"

// desiredRules merges routes into the fewest rules: one per (group, operations).
func desiredRules(routes []route) []RuleSpec {
	ops := map[string]map[string]map[admissionv1.OperationType]bool{} // group → resource → ops
	for _, rt := range routes {
		for g := range rt.groups {
			for r := range rt.resources {
				if ops[g] == nil {
					ops[g] = map[string]map[admissionv1.OperationType]bool{}
				}
				if ops[g][r] == nil {
					ops[g][r] = map[admissionv1.OperationType]bool{}
				}
				if rt.create {
					ops[g][r][admissionv1.Create] = true
				}
				if rt.update || rt.del || rt.create { // an update into a selector is a create for Git
					ops[g][r][admissionv1.Update] = true
				}
				if rt.del {
					ops[g][r][admissionv1.Delete] = true
				}
			}
		}
	}
	byKey := map[string]*RuleSpec{}
	for g, resources := range ops {
		for r, set := range resources {
			list := sortedOps(set)
			key := g + "|" + fmt.Sprint(list)
			rule, ok := byKey[key]
			if !ok {
				rule = &RuleSpec{Operations: list, Rule: admissionv1.Rule{APIGroups: []string{g}, APIVersions: []string{"*"}, Scope: ptr.To(admissionv1.AllScopes)}}
				byKey[key] = rule
			}
			rule.Resources = append(rule.Resources, r)
		}
	}
	out := make([]RuleSpec, 0, len(byKey))
	for _, r := range byKey {
		sort.Strings(r.Resources)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.APIGroups[0]+"|"+strings.Join(a.Resources, ",") < b.APIGroups[0]+"|"+strings.Join(b.Resources, ",")
	})
	return out
}

func sortedOps(set map[admissionv1.OperationType]bool) []admissionv1.OperationType {
	var out []admissionv1.OperationType
	for _, op := range []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
		if set[op] {
			out = append(out, op)
		}
	}
	return out
}

// WebhookPolicy is what the operator owns in its webhook entry besides the rules.
type WebhookPolicy struct {
	// ExcludedNamespaces never reach the webhook (kube-system, kube-node-lease, the operator's).
	ExcludedNamespaces []string
	// SkipUsers are never judged: the operator itself and GitOps controllers applying from Git
	// (a loop guard for bi-directional GitOps).
	SkipUsers []string
	// SkipFieldManagers are field managers (kubectl --field-manager, server-side apply) whose
	// writes are never judged, for controllers that share a user with others.
	SkipFieldManagers []string
	FailurePolicy     admissionv1.FailurePolicyType
	TimeoutSecond     int32
	// Self is the operator's own user (also in SkipUsers): its writes are neither judged nor
	// recorded.
	Self string
	// Scoped lists the only namespaces from which writes of a resource are sent (see
	// NamespacesFor); a resource not in it is sent from every namespace not excluded.
	Scoped map[schema.GroupResource][]string
	// SkipOwned says objects with a controller ownerReference are noise the watcher never
	// captures (watcher.Noise.CaptureOwned off): their writes are not sent at all
	// (ownedCondition), so an outage under failurePolicy Fail never blocks the Pods,
	// ReplicaSets and Jobs of a resource a "*" rule names.
	SkipOwned bool
	// Relabels says some rule takes objects from the namespaces a namespaceSelector other
	// than {} (which no relabel flips) chooses (RelabelsFor): a namespace's label changes are sent too (relabelRule, relabelCondition),
	// since they move its objects into or out of GitTargets (DecideRelabel).
	Relabels bool
}

// ApplyPolicy sets rules and policy on the watched webhook entry and leaves everything else
// (clientConfig above all) as it was. It reports whether anything changed.
func ApplyPolicy(w *admissionv1.ValidatingWebhook, rules []RuleSpec, p WebhookPolicy) bool {
	before := w.DeepCopy()
	relabels := p.Relabels && !sendsNamespaceUpdates(rules)
	if relabels {
		rules = append(slices.Clip(rules), relabelRule)
	}
	setEntry(w, rules, p, p.FailurePolicy)
	if relabels {
		w.MatchConditions = append(w.MatchConditions, relabelCondition)
	}
	if len(p.SkipUsers) > 0 {
		w.MatchConditions = append(w.MatchConditions, admissionv1.MatchCondition{
			Name:       "skip-gitops-controllers",
			Expression: fmt.Sprintf("!(request.userInfo.username in [%s])", celList(p.SkipUsers)),
		})
	}
	if len(p.SkipFieldManagers) > 0 {
		w.MatchConditions = append(w.MatchConditions, admissionv1.MatchCondition{
			Name:       "skip-gitops-field-managers",
			Expression: "!" + skippedManager(p.SkipFieldManagers),
		})
	}
	return !equality.Semantic.DeepEqual(before, w)
}

// relabelRule sends the updates of namespaces, for their label changes (relabelCondition),
// when no rule watches namespaces themselves.
var relabelRule = RuleSpec{
	Operations: []admissionv1.OperationType{admissionv1.Update},
	Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"namespaces"},
		Scope: ptr.To(admissionv1.AllScopes)},
}

// relabelCondition narrows relabelRule to updates that change a namespace's labels: its
// annotations, finalizers and the like move nothing into or out of a GitTarget, and an
// outage under failurePolicy Fail then blocks only relabels.
var relabelCondition = admissionv1.MatchCondition{
	Name:       "only-namespace-relabels",
	Expression: "!(request.resource.group == '' && request.resource.resource == 'namespaces') || request.operation != 'UPDATE' || " + labelsChanged,
}

// labelsChanged is the CEL condition that an update changes the object's labels.
const labelsChanged = "(has(object.metadata.labels) != has(oldObject.metadata.labels) || " +
	"(has(object.metadata.labels) && object.metadata.labels != oldObject.metadata.labels))"

// sendsNamespaceUpdates says whether rules already send every update of a namespace (a
// rule watches namespaces themselves). Pure.
func sendsNamespaceUpdates(rules []RuleSpec) bool {
	for _, r := range rules {
		if slices.Contains(r.Operations, admissionv1.Update) && (slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, "namespaces") || slices.Contains(r.Resources, "*")) {
			return true
		}
	}
	return false
}

// RelabelsFor says whether some watched resource is taken by a namespaceSelector other than
// {}, so that relabelling a namespace moves objects (WebhookPolicy.Relabels). Pure.
func RelabelsFor(watched []watcher.WatchedResource) bool {
	return slices.ContainsFunc(watched, func(r watcher.WatchedResource) bool { return r.ByNamespaceLabels })
}

// skippedManager is the CEL condition of a write a GitOps controller applies under a
// service account it impersonates (Flux's serviceAccountName, Argo CD's impersonation): its
// field manager is one of managers, and its user a service account. A client chooses its
// field manager, so a person naming one (kubectl --field-manager=kustomize-controller) is
// judged all the same; a workload holding a service account's token still can skip.
func skippedManager(managers []string) string {
	return fmt.Sprintf("(request.userInfo.username.startsWith('system:serviceaccount:') && has(request.options) && "+
		"has(request.options.fieldManager) && request.options.fieldManager in [%s])", celList(managers))
}

// ApplyRecordPolicy sets the recorded entry to the watched entry's rules, narrowed by
// matchConditions to the writes the watched entry skips (a skip user's, or a skip field
// manager's), and to the scale subresource of what they update (ScaleRules), which the
// watched entry never sees; never the operator's own writes; failurePolicy Ignore, so it
// never blocks them. It reports whether anything changed.
func ApplyRecordPolicy(w *admissionv1.ValidatingWebhook, rules []RuleSpec, p WebhookPolicy) bool {
	before := w.DeepCopy()
	users := slices.DeleteFunc(slices.Clone(p.SkipUsers), func(u string) bool { return u == p.Self })
	var skipped []string
	if len(users) > 0 {
		skipped = append(skipped, fmt.Sprintf("request.userInfo.username in [%s]", celList(users)))
	}
	if len(p.SkipFieldManagers) > 0 {
		skipped = append(skipped, skippedManager(p.SkipFieldManagers))
	}
	var recorded []RuleSpec
	if len(skipped) > 0 {
		recorded = append(recorded, rules...)
	}
	scale := ScaleRules(rules)
	recorded = append(recorded, scale...)
	if len(scale) > 0 {
		skipped = append([]string{fmt.Sprintf("(has(request.subResource) && request.subResource == %q)", ScaleSubresource)}, skipped...)
	}
	setEntry(w, recorded, p, admissionv1.Ignore)
	if len(recorded) > 0 {
		w.MatchConditions = append(w.MatchConditions,
			admissionv1.MatchCondition{Name: "recorded-writes", Expression: strings.Join(skipped, " || ")},
			admissionv1.MatchCondition{Name: "not-the-operator", Expression: fmt.Sprintf("request.userInfo.username != %q", p.Self)},
		)
	}
	return !equality.Semantic.DeepEqual(before, w)
}

// ScaleRules are the rules of the scale subresource of every resource rules update: a
// write through it (kubectl scale) changes the object's replicas without passing the
// watched entry, which takes the objects themselves. Pure.
func ScaleRules(rules []RuleSpec) []RuleSpec {
	var out []RuleSpec
	for _, r := range rules {
		if !slices.Contains(r.Operations, admissionv1.Update) {
			continue
		}
		scaled := *r.DeepCopy()
		scaled.Operations = []admissionv1.OperationType{admissionv1.Update}
		scaled.Resources = make([]string, len(r.Resources))
		for i, res := range r.Resources {
			scaled.Resources[i] = res + "/" + ScaleSubresource
		}
		out = append(out, scaled)
	}
	return out
}

// setEntry sets what both kept entries share: rules (none for nil), the namespaces left
// out, failure policy and timeout, and the namespace-scope match condition (see
// namespaceCondition) as the only one yet.
func setEntry(w *admissionv1.ValidatingWebhook, rules []RuleSpec, p WebhookPolicy, failure admissionv1.FailurePolicyType) {
	if rules == nil {
		rules = []RuleSpec{}
	}
	w.Rules = rules
	w.SideEffects = ptr.To(admissionv1.SideEffectClassNone)
	w.AdmissionReviewVersions = []string{"v1"}
	w.FailurePolicy = ptr.To(failure)
	w.TimeoutSeconds = ptr.To(p.TimeoutSecond)
	w.MatchPolicy = ptr.To(admissionv1.Equivalent)
	w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: p.ExcludedNamespaces,
	}}}
	w.MatchConditions = nil
	if c := namespaceCondition(p.Scoped); c != nil {
		w.MatchConditions = append(w.MatchConditions, *c)
	}
	if p.SkipOwned {
		w.MatchConditions = append(w.MatchConditions, ownedCondition)
	}
}

// ownedCondition sends a write unless the object has a controller ownerReference both
// before and after it (only after for a creation, only before for a deletion), as the
// handler skips it (Watched.route): an object adopted or orphaned by the write is still
// sent, since for Git it leaves or arrives. An update that changes a namespace's labels is
// always sent: it moves the objects in the namespace, which a tenant operator owning the
// namespace does not make noise (DecideRelabel). The owned namespace's other writes are
// still skipped.
var ownedCondition = admissionv1.MatchCondition{
	Name: "skip-owned-objects",
	Expression: "(request.resource.group == '' && request.resource.resource == 'namespaces' && request.operation == 'UPDATE' && " +
		labelsChanged + ") || " +
		"!((request.operation == 'DELETE' || " + controlled("object") + ") && " +
		"(request.operation == 'CREATE' || " + controlled("oldObject") + "))",
}

// controlled is the CEL condition that obj (object or oldObject) has a controller
// ownerReference.
func controlled(obj string) string {
	return fmt.Sprintf("(has(%[1]s.metadata.ownerReferences) && %[1]s.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))", obj)
}

// celList renders strings as a CEL list literal body.
func celList(xs []string) string {
	quoted := make([]string, 0, len(xs))
	for _, x := range xs {
		quoted = append(quoted, fmt.Sprintf("%q", x))
	}
	return strings.Join(quoted, ", ")
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=update,resourceNames=gitops-reverser
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=gitops-reverser-system

// RulesFor turns the watcher's resolved resources into the watched entry's rules: the API
// server sends exactly the writes the watcher acts on, so a "*" never brings it the
// cluster's Events or Leases.
func RulesFor(watched []watcher.WatchedResource) []RuleSpec {
	routes := make([]route, 0, len(watched))
	for _, r := range watched {
		routes = append(routes, route{groups: map[string]bool{r.GVR.Group: true}, resources: map[string]bool{r.GVR.Resource: true},
			create: r.Create, update: r.Update, del: r.Delete})
	}
	return desiredRules(routes)
}

// NamespacesFor lists, per resource, the only namespaces the watcher captures it in (every
// claim a WatchRule's), for the namespace-scope match condition: a write elsewhere never
// reaches the webhook, so an operator outage cannot block it.
func NamespacesFor(watched []watcher.WatchedResource) map[schema.GroupResource][]string {
	out := map[schema.GroupResource][]string{}
	anywhere := map[schema.GroupResource]bool{} // two versions of one resource: any one unscoped wins
	for _, r := range watched {
		gr := r.GVR.GroupResource()
		if len(r.Namespaces) == 0 {
			anywhere[gr] = true
			continue
		}
		for _, ns := range r.Namespaces {
			if !slices.Contains(out[gr], ns) {
				out[gr] = append(out[gr], ns)
			}
		}
	}
	pairs, length := 0, 0
	for gr := range out {
		if anywhere[gr] {
			delete(out, gr)
			continue
		}
		sort.Strings(out[gr])
		pairs += len(out[gr])
		length += len(gr.Group) + len(gr.Resource) + 5 // 'group/resource', in the list of resources
		for _, ns := range out[gr] {
			length += len(gr.Group) + len(gr.Resource) + len(ns) + 6
		}
	}
	if pairs > maxScopedPairs || length > maxScopedLength {
		return nil
	}
	return out
}

// maxScopedPairs and maxScopedLength keep the namespace condition below the API server's
// limit on a CEL expression (100,000 characters; long groups and namespaces reach it before
// 1,000 pairs): beyond either, writes are sent from every namespace. A condition over the
// limit would make the API server refuse every update of the webhook configuration.
const (
	maxScopedPairs  = 1000
	maxScopedLength = 90_000
)

// namespaceCondition is the match condition that sends a write of a resource only some
// WatchRules capture only from their namespaces; nil when there is none. It is one
// expression of two lists, "group/resource" and "group/resource/namespace", so it stays one
// of the 64 conditions an entry may have however many rules there are.
func namespaceCondition(scoped map[schema.GroupResource][]string) *admissionv1.MatchCondition {
	if len(scoped) == 0 {
		return nil
	}
	var resources, pairs []string
	for gr, namespaces := range scoped {
		key := gr.Group + "/" + gr.Resource
		resources = append(resources, key)
		for _, ns := range namespaces {
			pairs = append(pairs, key+"/"+ns)
		}
	}
	sort.Strings(resources)
	sort.Strings(pairs)
	const key = "request.resource.group + '/' + request.resource.resource"
	return &admissionv1.MatchCondition{
		Name:       "only-watched-namespaces",
		Expression: fmt.Sprintf("!((%s) in [%s]) || (%s + '/' + request.namespace) in [%s]", key, celList(resources), key, celList(pairs)),
	}
}

// RuleSync keeps the named ValidatingWebhookConfiguration's watched entry in step with the
// watched resources. It runs on the leader only and never touches clientConfig.
type RuleSync struct {
	Client client.Client
	View   *View
	// Watched returns the resources to judge (the watcher's, through RulesFor and
	// NamespacesFor); nil takes the rules as the view's WatchRules name them, unscoped.
	Watched func() []watcher.WatchedResource
	// Loaded says whether Watched already covers every existing rule; until it first does,
	// the configuration is left as it is (a new leader's watcher starts empty, and its
	// rules would otherwise take every watched resource out of the webhook). Nil: always.
	Loaded func() bool
	Name   string
	Policy WebhookPolicy
	Log    logr.Logger
	// Informers, when set, brings every change of the configuration (an upgrade that
	// re-applies it with no rules, a person's edit) to a sync at once, not at the next
	// minute's check. Nil: only the minute's check undoes drift.
	Informers ctrlcache.Informers

	changed      chan struct{}
	retryPending atomic.Bool
	loaded       bool
	started      time.Time
}

// NewRuleSync builds a RuleSync; wire Notify into View.OnChange.
func NewRuleSync(c client.Client, v *View, name string, p WebhookPolicy, log logr.Logger) *RuleSync {
	return &RuleSync{Client: c, View: v, Name: name, Policy: p, Log: log, changed: make(chan struct{}, 1)}
}

// Notify asks for a sync soon.
func (s *RuleSync) Notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// NeedLeaderElection keeps one writer of the configuration.
func (s *RuleSync) NeedLeaderElection() bool { return true }

// Start syncs on every view change, and every minute to undo drift.
func (s *RuleSync) Start(ctx context.Context) error {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	s.started = time.Now()
	if err := s.watchConfiguration(ctx); err != nil {
		s.Log.Error(err, "watching the webhook configuration: drift is undone at each minute's check only",
			"validatingWebhookConfiguration", s.Name)
	}
	s.Notify()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
		case <-tick.C:
		}
		err := s.sync(ctx)
		switch {
		case errors.Is(err, errRulesLoading):
			s.Log.V(1).Info("keeping webhook rules until every WatchRule is loaded", "validatingWebhookConfiguration", s.Name)
			s.retryAfter(time.Second)
		case err != nil:
			s.Log.Error(forbiddenHint(err, s.Name), "syncing webhook rules", "validatingWebhookConfiguration", s.Name)
			s.retryAfter(2 * time.Second)
		}
	}
}

// forbiddenHint adds to a sync the API server refused what to grant: the shipped ClusterRole
// lets the operator update the ValidatingWebhookConfiguration named gitops-reverser only
// (resourceNames), so a configuration renamed with --webhook-configuration-name needs that
// rule edited (docs/security.md); until then nothing is judged. Pure.
func forbiddenHint(err error, name string) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("%w (grant the operator's ClusterRole update on ValidatingWebhookConfiguration %s: the shipped one names "+
		"gitops-reverser only, by resourceNames; until then no write is judged)", err, name)
}

// retryAfter asks for a sync after d, unless a retry is already pending: each failed sync
// scheduling its own would grow a chain per change event while an error persists.
func (s *RuleSync) retryAfter(d time.Duration) {
	if s.retryPending.CompareAndSwap(false, true) {
		time.AfterFunc(d, func() {
			s.retryPending.Store(false)
			s.Notify()
		})
	}
}

// watchConfiguration asks for a sync whenever the configuration changes (Informers). A
// sync that finds it as it should be writes nothing, so its own updates end there.
func (s *RuleSync) watchConfiguration(ctx context.Context) error {
	if s.Informers == nil {
		return nil
	}
	// Not waiting for its sync: a watch that cannot start must not hold the syncs back.
	inf, err := s.Informers.GetInformer(ctx, &admissionv1.ValidatingWebhookConfiguration{}, ctrlcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	ours := func(obj any) {
		if o, ok := obj.(client.Object); ok && o.GetName() == s.Name {
			s.Notify()
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    ours,
		UpdateFunc: func(_, obj any) { ours(obj) },
	})
	return err
}

// loadDeadline bounds a new leader's wait for its watcher: a rule that keeps failing before
// it is registered (a discovery error) must not freeze the webhook's rules for good.
const loadDeadline = 2 * time.Minute

// waitForRules says whether a sync still waits for the watcher to load every rule.
func waitForRules(loaded func() bool, waited time.Duration) bool {
	return loaded != nil && waited < loadDeadline && !loaded()
}

// errRulesLoading says the watcher has not loaded every rule yet; the sync waits.
var errRulesLoading = errors.New("the watcher has not loaded every rule yet")

func (s *RuleSync) sync(ctx context.Context) error {
	if !s.loaded && waitForRules(s.Loaded, time.Since(s.started)) {
		return errRulesLoading
	}
	s.loaded = true
	rules, p := s.View.WatchedRules(), s.Policy
	if s.Watched != nil {
		watched := s.Watched()
		rules, p.Scoped, p.Relabels = RulesFor(watched), NamespacesFor(watched), RelabelsFor(watched)
	} else {
		p.Relabels = s.View.selectsNamespaces()
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var vwc admissionv1.ValidatingWebhookConfiguration
		if err := s.Client.Get(ctx, types.NamespacedName{Name: s.Name}, &vwc); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("ValidatingWebhookConfiguration %s not found (install it with the chart or config/webhook)", s.Name)
			}
			return err
		}
		changed := false
		found := false
		for i := range vwc.Webhooks {
			switch vwc.Webhooks[i].Name {
			case WatchedWebhookName:
				found = true
				changed = ApplyPolicy(&vwc.Webhooks[i], rules, p) || changed
			case RecordedWebhookName:
				changed = ApplyRecordPolicy(&vwc.Webhooks[i], rules, p) || changed
			}
		}
		if !found {
			return fmt.Errorf("ValidatingWebhookConfiguration %s has no webhook named %s", s.Name, WatchedWebhookName)
		}
		if !changed {
			return nil
		}
		s.Log.Info("updating webhook rules", "validatingWebhookConfiguration", s.Name, "rules", len(rules))
		return s.Client.Update(ctx, &vwc)
	})
}
