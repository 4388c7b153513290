package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/watcher"
)

// route is one compiled rule: which requests go to which GitTarget.
type route struct {
	target     types.NamespacedName
	groups     map[string]bool
	resources  map[string]bool
	namespace  string // WatchRule: its namespace; "" for a ClusterWatchRule
	cluster    bool
	nsSelector labels.Selector // ClusterWatchRule, namespaced resources; nil = none
	objects    labels.Selector
	create     bool
	update     bool
	del        bool
}

// snapshot is an immutable picture of targets and routes, swapped atomically so a decision
// never waits for a rebuild.
type snapshot struct {
	targets map[types.NamespacedName]TargetState
	routes  []route
	// rules names every WatchRule and ClusterWatchRule, as watcher.RuleKey does.
	rules []string
	// keptOut are the Secrets GitProviders name in spec.secretRef and GitTargets hold their
	// keys in (KeySecrets), which no target writes (KeptOutOfGit).
	keptOut map[types.NamespacedName]bool
}

// Locator tells where an object would land, whether the writer would refuse it there, and
// whether its document there is encrypted. The Git writer implements it, on the leader;
// the other replicas ask the leader's (LeaderLocator). For a target the writer does not
// know it answers the zero Location and the canonical path is used.
type Locator interface {
	Locate(target types.NamespacedName, gvr schema.GroupVersionResource, kind, namespace, name string) batch.Location
}

// View keeps the webhook's in-memory picture of GitTargets and rules current from the
// manager's cache, on every replica.
type View struct {
	Cache cache.Cache
	// Live reads a namespace the cache has not seen yet (one created a moment before the
	// object being judged, e.g. by the same kubectl apply); nil: the cache only.
	Live    client.Reader
	Log     logr.Logger
	Locator Locator
	// OnChange is called after each rebuild (the rule syncer listens).
	OnChange func()

	snap atomic.Pointer[snapshot]
	// built is set once the snapshot reflects the synced cache: before that every request
	// would look routed nowhere and be allowed unjudged.
	built atomic.Bool
	kick  chan struct{}
}

// errNotBuilt says the view has not read the synced cache yet.
var errNotBuilt = errors.New("the admission view has not read the GitTargets and watch rules yet")

// Ready is a readiness check (healthz.Checker): a replica takes admission traffic only once
// its view holds the targets and rules, so a rollout never admits writes unjudged.
func (v *View) Ready(*http.Request) error {
	if !v.built.Load() {
		return errNotBuilt
	}
	return nil
}

// OnceBuilt serves next once the view is built, and answers 503 Service Unavailable
// before: the API server then applies the entry's failurePolicy, as when the operator is
// down, rather than take this replica's answer, which would route every request nowhere
// and allow it unjudged. Readiness keeps a Service's traffic off such a replica; an entry
// whose clientConfig is a URL (an operator outside the cluster, `make demo`) has no
// readiness in between, so this does the same there.
func (v *View) OnceBuilt(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !v.built.Load() {
			// A Status, whose message the API server quotes in the error it returns.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Message: "gitops-reverser is starting: " + errNotBuilt.Error() + "; retry in a few seconds", Reason: metav1.StatusReasonServiceUnavailable,
				Code: http.StatusServiceUnavailable})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RuleKeys names every WatchRule and ClusterWatchRule the view holds, as watcher.RuleKey
// does; ok is false until the view is built.
func (v *View) RuleKeys() (keys []string, ok bool) {
	if !v.built.Load() {
		return nil, false
	}
	return v.snap.Load().rules, true
}

// NewView builds a View; Start fills it.
func NewView(c cache.Cache, log logr.Logger) *View {
	v := &View{Cache: c, Log: log, kick: make(chan struct{}, 1)}
	v.snap.Store(&snapshot{targets: map[types.NamespacedName]TargetState{}})
	return v
}

// KeptOutOfGit reports whether a GitProvider names the Secret key as its credentials, or a
// GitTarget as its keys: no target writes it (gitops/controller.KeptOutOfGit).
func (v *View) KeptOutOfGit(key types.NamespacedName) bool {
	return v.snap.Load().keptOut[key]
}

// NeedLeaderElection is false: every replica serves the webhook.
func (v *View) NeedLeaderElection() bool { return false }

// Start registers informers and rebuilds the snapshot whenever an input changes.
func (v *View) Start(ctx context.Context) error {
	for _, obj := range []client.Object{&v1alpha1.GitTarget{}, &v1alpha1.GitProvider{}, &v1alpha1.WatchRule{}, &v1alpha1.ClusterWatchRule{}, &corev1.Namespace{}} {
		inf, err := v.Cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, ok := obj.(*corev1.Namespace); ok {
			continue // read at decision time, no rebuild needed
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { v.poke() },
			UpdateFunc: func(any, any) { v.poke() },
			DeleteFunc: func(any) { v.poke() },
		}); err != nil {
			return err
		}
	}
	if !v.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	v.poke()
	retry := time.Second
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-v.kick:
			if err := v.rebuild(ctx); err != nil {
				// e.g. a cache list the operator may not make: retried with backoff, said once per try.
				v.Log.Error(err, "rebuilding the admission view; retrying", "retryIn", retry.String())
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(retry):
				}
				retry = min(2*retry, 30*time.Second)
				v.poke()
				continue
			}
			retry = time.Second
			v.built.Store(true)
			if v.OnChange != nil {
				v.OnChange()
			}
		}
	}
}

func (v *View) poke() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

func (v *View) rebuild(ctx context.Context) error {
	var targets v1alpha1.GitTargetList
	var providers v1alpha1.GitProviderList
	var rules v1alpha1.WatchRuleList
	var crules v1alpha1.ClusterWatchRuleList
	for _, l := range []client.ObjectList{&targets, &providers, &rules, &crules} {
		if err := v.Cache.List(ctx, l); err != nil {
			return err
		}
	}
	s := &snapshot{targets: map[types.NamespacedName]TargetState{}, keptOut: keptOutOfGit(providers.Items, targets.Items)}
	urls := map[types.NamespacedName]string{}
	for _, p := range providers.Items {
		urls[client.ObjectKeyFromObject(&p)] = repo.Redact(p.Spec.URL) // shown to anyone whose change it judges
	}
	for _, t := range targets.Items {
		if !t.DeletionTimestamp.IsZero() {
			continue // stopped writing: routed nowhere, as a target that is gone
		}
		s.targets[client.ObjectKeyFromObject(&t)] = targetState(&t, urls[types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.ProviderRef.Name}])
	}
	for _, r := range rules.Items {
		s.rules = append(s.rules, watcher.RuleKey("WatchRule", r.Namespace, r.Name))
		target := types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.TargetRef.Name}
		s.routes = append(s.routes, compileAll(len(r.Spec.Rules), func(i int) (route, error) {
			return compile(target, r.Namespace, false, r.Spec.Rules[i], nil)
		})...)
	}
	for _, r := range crules.Items {
		s.rules = append(s.rules, watcher.RuleKey("ClusterWatchRule", "", r.Name))
		target := types.NamespacedName{Namespace: r.Spec.TargetRef.Namespace, Name: r.Spec.TargetRef.Name}
		s.routes = append(s.routes, compileAll(len(r.Spec.Rules), func(i int) (route, error) {
			return compile(target, "", true, r.Spec.Rules[i].ResourceRule, r.Spec.Rules[i].NamespaceSelector)
		})...)
	}
	sort.SliceStable(s.routes, func(i, j int) bool { return s.routes[i].target.String() < s.routes[j].target.String() })
	v.snap.Store(s)
	return nil
}

// keptOutOfGit lists the Secrets no target writes: those GitProviders name as their
// credentials and those GitTargets hold their keys in. Pure.
func keptOutOfGit(providers []v1alpha1.GitProvider, targets []v1alpha1.GitTarget) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, p := range providers {
		if p.Spec.SecretRef != nil {
			out[types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.SecretRef.Name}] = true
		}
	}
	for i := range targets {
		for _, k := range targets[i].KeySecrets() {
			out[k] = true
		}
	}
	return out
}

// targetState reads what admission needs from a GitTarget's spec and status.
func targetState(t *v1alpha1.GitTarget, url string) TargetState {
	st := TargetState{Key: client.ObjectKeyFromObject(t), URL: url, Branch: t.Spec.Branch, Folder: t.Spec.Path,
		KeepsDeleted: t.Spec.Prune.Mode == batch.PruneNever}
	if c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		st.Stalled, st.StalledMessage = true, c.Message
	}
	encryptionState(&st, t)
	return st
}

// encryptionState reads whether the target can encrypt (its EncryptionReady condition, for
// the current generation) and which resources it treats as sensitive. A target that sets
// spec.encryption.age and has no condition yet (created a moment ago, in the same
// `kubectl apply -f dir/` as a Secret routed to it) is unchecked, not unconfigured.
func encryptionState(st *TargetState, t *v1alpha1.GitTarget) {
	c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionEncryptionReady)
	switch {
	case c != nil:
		st.EncryptionUnchecked = c.ObservedGeneration != t.Generation
		st.EncryptionReady = c.Status == metav1.ConditionTrue && !st.EncryptionUnchecked
		if c.Status != metav1.ConditionTrue { // a True one's message says what works
			st.EncryptionMessage = c.Message
		}
	case t.Spec.Encryption != nil && t.Spec.Encryption.Age != nil:
		st.EncryptionUnchecked = true
	}
	if e := t.Spec.Encryption; e != nil {
		for _, gr := range e.SensitiveResources {
			st.SensitiveResources = append(st.SensitiveResources, schema.GroupResource{Group: gr.Group, Resource: gr.Resource})
		}
	}
}

// compileAll compiles a rule's n resource rules, or none when one of them cannot be (an
// objectSelector it cannot read): the watcher then registers nothing of the rule (it is
// Stalled), so admission routes nothing by it either.
func compileAll(n int, compileOne func(int) (route, error)) []route {
	out := make([]route, 0, n)
	for i := range n {
		rt, err := compileOne(i)
		if err != nil {
			return nil
		}
		out = append(out, rt)
	}
	return out
}

// compile turns one resource rule into a route. An objectSelector it cannot read fails it,
// as it fails the watcher's claims (claimsFor). A namespaceSelector it cannot read does
// not: the watcher reads one only for the namespaced resources it resolves, so it may still
// capture the rule's cluster-scoped resources, which the route keeps judging; the route
// takes no namespace. (Where the watcher does read it, it registers nothing of the rule,
// and admission judges the rule's other resource rules in vain: the milder error.)
func compile(target types.NamespacedName, ns string, cluster bool, r v1alpha1.ResourceRule, nsSel *metav1.LabelSelector) (route, error) {
	objSel, err := watcher.Selector(r.ObjectSelector)
	if err != nil {
		return route{}, err
	}
	rt := route{target: target, namespace: ns, cluster: cluster, objects: objSel, groups: set(r.APIGroups), resources: set(r.Resources)}
	if nsSel != nil {
		if sel, err := metav1.LabelSelectorAsSelector(nsSel); err == nil {
			rt.nsSelector = sel
		}
	}
	rt.create, rt.update, rt.del = watcher.Operations(r.Operations)
	return rt, nil
}

func set(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Targets returns the states of the GitTargets the request routes to (route.routes).
// objLabels are the labels of the object being written (and oldLabels of the stored one,
// for updates and deletes). A target that only sees the object leave its selectors is
// Leaving: for Git that update is a deletion.
func (v *View) Targets(ctx context.Context, req Request, objLabels, oldLabels labels.Set) []TargetState {
	s := v.snap.Load()
	nsLabels := v.nsLabels(ctx)
	routed := map[types.NamespacedName]bool{}
	selected := map[types.NamespacedName]bool{} // the object as written, by any rule of the target
	var order []types.NamespacedName
	for _, rt := range s.routes {
		if _, ok := s.targets[rt.target]; !ok {
			continue
		}
		if req.Operation == Update && rt.selects(req, objLabels, nsLabels) {
			selected[rt.target] = true
		}
		if rt.routes(req, objLabels, oldLabels, nsLabels) && !routed[rt.target] {
			routed[rt.target] = true
			order = append(order, rt.target)
		}
	}
	out := make([]TargetState, 0, len(order))
	for _, key := range order {
		t := s.targets[key]
		// The writer writes whatever a rule of the target still selects, whichever rule's
		// operations brought the change: only an object none selects any more is leaving.
		t.Leaving = req.Operation == Update && !selected[key]
		out = append(out, t)
	}
	return out
}

// nsLabels reads namespaces' labels for one request, each namespace once: every rule with a
// namespaceSelector asks, twice for an update, and a namespace the cache has not seen yet
// costs a read from the API server, within the webhook's timeout.
func (v *View) nsLabels(ctx context.Context) func(string) labels.Set {
	read := map[string]labels.Set{}
	return func(name string) labels.Set {
		if l, ok := read[name]; ok {
			return l
		}
		var ns corev1.Namespace
		err := v.Cache.Get(ctx, types.NamespacedName{Name: name}, &ns)
		if apierrors.IsNotFound(err) && v.Live != nil {
			err = v.Live.Get(ctx, types.NamespacedName{Name: name}, &ns)
		}
		if err != nil {
			ns.Labels = nil
		}
		read[name] = ns.Labels
		return ns.Labels
	}
}

// selects says whether the route selects the object as written (resource, namespace and
// object labels), whatever its operations: the writer's Current decides the same way.
func (rt route) selects(req Request, objLabels labels.Set, nsLabels func(string) labels.Set) bool {
	return rt.covers(req, nsLabels) && ((objLabels != nil && rt.objects.Matches(objLabels)) || (objLabels == nil && rt.objects.Empty()))
}

// covers says whether the request's resource and namespace are the route's.
func (rt route) covers(req Request, nsLabels func(string) labels.Set) bool {
	anyResource := rt.resources["*"] && !watcher.RuntimeState(req.Resource.Group, req.Resource.Resource) // as watcher.Resolve
	if !(rt.groups["*"] || rt.groups[req.Resource.Group]) || !(anyResource || rt.resources[req.Resource.Resource]) {
		return false
	}
	switch {
	case req.Namespace == "" && !rt.cluster:
		return false
	case req.Namespace != "" && !rt.cluster && req.Namespace != rt.namespace:
		return false
	case req.Namespace != "" && rt.cluster && (rt.nsSelector == nil || !rt.nsSelector.Matches(nsLabels(req.Namespace))):
		return false
	}
	return true
}

// routes says whether the route's target acts on the request, as the watcher decides from
// the resulting event: a create it selects (CREATE); an update it selects now, under
// UPDATE, or that moves the object into its selector, under CREATE; an update that moves
// the object out of its selector, under DELETE (for Git a deletion, unless another rule of
// the target still selects it: see Targets); a delete it selected (DELETE).
func (rt route) routes(req Request, objLabels, oldLabels labels.Set, nsLabels func(string) labels.Set) bool {
	if !rt.covers(req, nsLabels) {
		return false
	}
	selects := func(l labels.Set) bool { return l != nil && rt.objects.Matches(l) }
	switch req.Operation {
	case Create:
		return rt.create && (selects(objLabels) || (objLabels == nil && rt.objects.Empty()))
	case Update:
		now, was := selects(objLabels), selects(oldLabels)
		if objLabels == nil && oldLabels == nil && rt.objects.Empty() {
			now, was = true, true // no labels decoded: an update within the rule
		}
		return (now && (rt.update || (rt.create && !was))) || (!now && was && rt.del)
	case Delete:
		return rt.del && (selects(oldLabels) || selects(objLabels) || (objLabels == nil && oldLabels == nil && rt.objects.Empty()))
	}
	return false
}

// Move is what new labels of a namespace do to one GitTarget: they bring the namespace's
// objects of Resources into its rules (Joins), or take them out.
type Move struct {
	Target TargetState
	Joins  bool
	// Resources are the resources of the rules that move, as they name them ("*" stays).
	Resources []schema.GroupResource
}

// Relabelled lists the Moves of relabelling namespace from old to now: for each target,
// the resources of the ClusterWatchRule rules whose namespaceSelector takes the namespace
// with one label set and not the other, and that act on what moves — an object taken in is
// written where the rule creates or updates, one left out is removed where it deletes — as
// the watcher's NamespaceRelabelled does. A resource another rule of the target takes from
// the namespace on the side where this one does not (stillTaken) does not move: the target
// holds it before and after.
func (v *View) Relabelled(namespace string, old, now labels.Set) []Move {
	s := v.snap.Load()
	var out []Move
	at := map[[2]string]int{} // target, joins → index in out
	for _, rt := range s.routes {
		t, ok := s.targets[rt.target]
		if !ok || !rt.cluster || rt.nsSelector == nil || rt.nsSelector.Matches(old) == rt.nsSelector.Matches(now) {
			continue
		}
		joins := rt.nsSelector.Matches(now)
		if (joins && !rt.create && !rt.update) || (!joins && !rt.del) {
			continue
		}
		before := old // the other side: what a rule took before an object joins, or takes after it leaves
		if !joins {
			before = now
		}
		for _, gr := range rt.groupResources() {
			if stillTaken(s.routes, rt, joins, gr, namespace, before) {
				continue
			}
			key := [2]string{rt.target.String(), fmt.Sprint(joins)}
			i, seen := at[key]
			if !seen {
				i, at[key] = len(out), len(out)
				out = append(out, Move{Target: t, Joins: joins})
			}
			if !slices.Contains(out[i].Resources, gr) {
				out[i].Resources = append(out[i].Resources, gr)
			}
		}
	}
	return out
}

// stillTaken says whether a rule of moving's target other than moving takes gr's objects
// from namespace, labelled other (the labels on the side where moving does not take
// them), as moving takes them (no object selector, or the same one): then they stay in the
// target whichever way moving's selector answers. Leaving, the watcher removes nothing
// another rule selects, whatever its operations; joining, it writes every object again,
// which changes nothing only where the other rule already wrote them as this one would (it
// updates, or both only create). "*" leaves out what the watcher's "*" does
// (watcher.RuntimeState). Pure.
func stillTaken(routes []route, moving route, joins bool, gr schema.GroupResource, namespace string, other labels.Set) bool {
	there := Request{Resource: gr, Namespace: namespace} // gr's objects in namespace, labelled other
	labelled := func(string) labels.Set { return other }
	for _, rt := range routes {
		if rt.target != moving.target || !rt.covers(there, labelled) ||
			!(rt.objects.Empty() || rt.objects.String() == moving.objects.String()) {
			continue
		}
		if !joins || rt.update || (rt.create && !moving.update) {
			return true
		}
	}
	return false
}

// groupResources lists the route's group/resource pairs, sorted, "*" as the rule names it.
func (rt route) groupResources() []schema.GroupResource {
	var out []schema.GroupResource
	for g := range rt.groups {
		for r := range rt.resources {
			out = append(out, schema.GroupResource{Group: g, Resource: r})
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// selectsNamespaces says whether some ClusterWatchRule takes objects by a namespaceSelector
// other than {}, which no relabel flips (WebhookPolicy.Relabels, for a RuleSync without the
// watcher's resources).
func (v *View) selectsNamespaces() bool {
	return slices.ContainsFunc(v.snap.Load().routes, func(rt route) bool { return rt.cluster && rt.nsSelector != nil && !rt.nsSelector.Empty() })
}

// WatchedRules lists, per group, the resources and operations any rule routes, for the
// ValidatingWebhookConfiguration, as the rules name them ("*" stays "*"). The operator
// uses the watcher's resolved resources instead (RulesFor); this is for a RuleSync
// without them.
func (v *View) WatchedRules() []RuleSpec {
	return desiredRules(v.snap.Load().routes)
}
