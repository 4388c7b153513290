// Package controller reconciles WatchRules and ClusterWatchRules: it resolves their
// resources through discovery and registers the resulting claims with the watcher.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/watcher"
)

// Registry is the part of the watcher the rule controllers drive.
type Registry interface {
	SetRule(ruleKey string, claims []watcher.Claim)
	// SetRuleWaiting registers a rule of target whose named resources may be in an API that
	// failed discovery: the target's lists prune nothing until SetRule.
	SetRuleWaiting(ruleKey string, target types.NamespacedName, claims []watcher.Claim)
	// ForgetRule drops a deleted rule, claims and all.
	ForgetRule(ruleKey string)
	// Claims are those registered for a rule (none when unknown).
	Claims(ruleKey string) []watcher.Claim
	// Registered says whether every rule of keys was set in this process.
	Registered(ruleKeys []string) bool
	// ListProblems says which of the resources could not be listed since their watch
	// started, with why, and whether another is still listing.
	ListProblems(gvrs []schema.GroupVersionResource) (problems []string, pending bool)
}

// errConfig marks a rule a human must fix.
var errConfig = errors.New("invalid rule")

// discovered is what the rule controllers learned from the API server: the resources it
// listed, and the registered resources of the rule at hand whose group-version failed to
// list this time (with why). An API that is briefly unavailable (an aggregated server
// restarting) is no rule change: compiling the rule without its resources would stop their
// informer and drop the changes waiting for it.
type discovered struct {
	lists        []*metav1.APIResourceList
	undiscovered []watcher.Resource
	failed       map[schema.GroupVersion]error
}

// undiscovered are the resources of registered claims whose group-version failed discovery.
func undiscovered(registered []watcher.Claim, failed map[schema.GroupVersion]error) []watcher.Resource {
	var out []watcher.Resource
	for _, c := range registered {
		if _, down := failed[c.Resource.GVR.GroupVersion()]; down && !slices.Contains(out, c.Resource) {
			out = append(out, c.Resource)
		}
	}
	return out
}

// withUndiscovered adds to what discovery resolved for a rule the undiscovered resources
// the rule names within its scope, unless a version of the same resource resolved.
func withUndiscovered(resolved []watcher.Resource, rule v1alpha1.ResourceRule, scope watcher.Scope, extra []watcher.Resource) []watcher.Resource {
	for _, r := range extra {
		inScope := r.Namespaced && scope.Namespaced || !r.Namespaced && scope.ClusterScoped
		resolvedAlready := slices.ContainsFunc(resolved, func(x watcher.Resource) bool { return x.GVR.GroupResource() == r.GVR.GroupResource() })
		if inScope && !resolvedAlready && ruleNames(rule, r.GVR) {
			resolved = append(resolved, r)
		}
	}
	return resolved
}

// ruleNames says whether a rule names a resource, by its group and plural or by "*".
func ruleNames(r v1alpha1.ResourceRule, gvr schema.GroupVersionResource) bool {
	return (slices.Contains(r.APIGroups, "*") || slices.Contains(r.APIGroups, gvr.Group)) &&
		(slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, gvr.Resource))
}

// keptMessage names the group-versions of claims that failed discovery and why, "" when
// none did.
func keptMessage(claims []watcher.Claim, failed map[schema.GroupVersion]error) string {
	var kept []string
	for _, c := range claims {
		if err, down := failed[c.Resource.GVR.GroupVersion()]; down {
			kept = append(kept, fmt.Sprintf("%s (%v)", c.Resource.GVR.GroupVersion(), err))
		}
	}
	if len(kept) == 0 {
		return ""
	}
	slices.Sort(kept)
	return fmt.Sprintf("discovery of %s failed: its resources are watched as before until it succeeds", strings.Join(slices.Compact(kept), ", "))
}

// discoveryRetry is how soon a rule that keeps resources through a discovery failure, or
// waits for an API that failed it, looks again.
const discoveryRetry = 30 * time.Second

// compiled is what a rule's resource rules compile to: the claims to register, the
// problems a human must fix (stalled), and the named resources that may be in an API that
// failed discovery this time (waiting), which are no configuration error yet.
type compiled struct {
	claims  []watcher.Claim
	stalled []string
	waiting []string
}

// add appends one resource rule's outcome.
func (c *compiled) add(o compiled) {
	c.claims = append(c.claims, o.claims...)
	c.stalled = append(c.stalled, o.stalled...)
	c.waiting = append(c.waiting, o.waiting...)
}

// register hands the claims of a rule of target to the registry, as waiting when it names
// resources an API failing discovery may hold.
func register(reg Registry, key string, target types.NamespacedName, c compiled) {
	if len(c.waiting) > 0 {
		reg.SetRuleWaiting(key, target, c.claims)
		return
	}
	reg.SetRule(key, c.claims)
}

// sortProblems tells Resolve's problems apart: a resource discovery did not list but that
// the rule keeps through its API's discovery failure (among resources) is no problem;
// one missing from every listed group while an API of one of its groups failed discovery
// waits for that API, since it may be there; the rest a human must fix.
func sortProblems(problems []watcher.Problem, resources []watcher.Resource, failed map[schema.GroupVersion]error) (stalled, waiting []string) {
	for _, p := range problems {
		kept := slices.ContainsFunc(resources, func(r watcher.Resource) bool { return r.GVR.Resource == p.Name && p.InGroup(r.GVR.Group) })
		switch down := failedGroupVersions(p, failed); {
		case p.Missing && kept:
		case p.Missing && down != "":
			waiting = append(waiting, fmt.Sprintf("%s is not listed while discovery of %s fails: it is watched once that API answers", p.Name, down))
		default:
			stalled = append(stalled, p.Message)
		}
	}
	return stalled, waiting
}

// everyResourceWaiting is what a rule taking every resource ("*") of a group it names
// waits for: that group's group-versions that failed discovery, unless some resource of the
// group resolved or was kept. Resolve reports nothing missing for "*", so without this the
// rule would be Ready watching none of the group, and look again only when a CRD changes.
// "*" groups name none, as in failedGroupVersions. Pure.
func everyResourceWaiting(rule v1alpha1.ResourceRule, resources []watcher.Resource, failed map[schema.GroupVersion]error) []string {
	if !slices.Contains(rule.Resources, "*") {
		return nil
	}
	var out []string
	for gv, err := range failed {
		if !slices.Contains(rule.APIGroups, gv.Group) || slices.ContainsFunc(resources, func(r watcher.Resource) bool { return r.GVR.Group == gv.Group }) {
			continue
		}
		out = append(out, fmt.Sprintf("the resources of %s are not listed while its discovery fails (%v): they are watched once that API answers", gv, err))
	}
	slices.Sort(out)
	return out
}

// failedGroupVersions names, with why, the group-versions of the groups p's rule names that
// failed discovery ("" when none did). "*" names none: any API failing anywhere (a broken
// metrics server is common) would otherwise hide a resource that simply does not exist.
func failedGroupVersions(p watcher.Problem, failed map[schema.GroupVersion]error) string {
	var out []string
	for gv, err := range failed {
		if slices.Contains(p.Groups, gv.Group) {
			out = append(out, fmt.Sprintf("%s (%v)", gv, err))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// notWatchingYet records on a rule's status that it watches nothing yet, when its
// reconcile failed (err: discovery failed outright, its GitTarget could not be read)
// before the rule was registered in this process: the Ready an earlier process left would
// say it watches what nothing watches now, while its targets' snapshots wait for it
// (Always prunes nothing). A rule this process registered keeps its claims, and its
// status, through the error.
func notWatchingYet(st *v1alpha1.WatchRuleStatus, gen int64, reg Registry, key string, err error) {
	if reg.Registered([]string{key}) {
		return
	}
	st.Resources = nil
	msg := fmt.Sprintf("%v; not watching yet, retrying with backoff", err)
	v1alpha1.SetCondition(&st.Conditions, gen, v1alpha1.ConditionResourcesResolved, false, v1alpha1.ReasonRetrying, msg)
	v1alpha1.SetReconciling(&st.Conditions, gen, v1alpha1.ReasonRetrying, msg)
}

// watchesNothing records on a rule's status that it watches nothing, for a configuration
// problem (reason, msg): no resources listed, ResourcesResolved False, Stalled.
func watchesNothing(st *v1alpha1.WatchRuleStatus, gen int64, reason, msg string) {
	st.Resources = nil
	v1alpha1.SetCondition(&st.Conditions, gen, v1alpha1.ConditionResourcesResolved, false, reason, msg)
	v1alpha1.SetStalled(&st.Conditions, gen, reason, msg)
}

// targetExistence passes only the GitTarget events a rule's verdict depends on: the target
// appearing, being deleted (kept by finalizers), or going. Its status changes at every commit; each change would otherwise run
// a full API discovery for every rule of its namespace (and every ClusterWatchRule).
func targetExistence() builder.WatchesOption {
	return builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}})
}

// targetMissing says why a rule's GitTarget takes nothing: not found (err), or being
// deleted, kept only by finalizers (a foreground deletion), when its writer has stopped.
func targetMissing(target types.NamespacedName, err error) string {
	if err != nil {
		return fmt.Sprintf("GitTarget %s not found: create it or fix spec.targetRef", target)
	}
	return fmt.Sprintf("GitTarget %s is being deleted: create it again once it is gone, or fix spec.targetRef", target)
}

// claimsFor compiles one rule into claims for target; namespace "" means cluster-wide.
func claimsFor(target types.NamespacedName, namespace string, rule v1alpha1.ResourceRule, nsSel *metav1.LabelSelector,
	d discovered, clusterRule bool) (compiled, error) {
	scope := watcher.WatchRuleScope
	if clusterRule {
		scope = watcher.Scope{Namespaced: nsSel != nil, ClusterScoped: true}
	}
	resources, problems := watcher.Resolve(rule, d.lists, scope)
	resources = withUndiscovered(resources, rule, scope, d.undiscovered)
	objSel, err := watcher.Selector(rule.ObjectSelector)
	if err != nil {
		return compiled{}, fmt.Errorf("%w: objectSelector: %v", errConfig, err)
	}
	create, update, del := watcher.Operations(rule.Operations)
	var out compiled
	out.stalled, out.waiting = sortProblems(problems, resources, d.failed)
	out.waiting = append(out.waiting, everyResourceWaiting(rule, resources, d.failed)...)
	for _, r := range resources {
		c := watcher.Claim{Target: target, Resource: r, Namespace: namespace, ObjectSelector: objSel, Create: create, Update: update, Delete: del}
		if r.Namespaced && clusterRule { // Resolve took it only with a namespaceSelector
			if c.NamespaceSelector, err = watcher.Selector(nsSel); err != nil {
				return compiled{}, fmt.Errorf("%w: namespaceSelector: %v", errConfig, err)
			}
		}
		out.claims = append(out.claims, c)
	}
	return out, nil
}

// unresolvedRetry re-checks rules naming resources the server does not have yet; CRD
// events usually arrive first, this covers discovery lagging behind them.
const unresolvedRetry = 30 * time.Second

// problemsShown is how many of a rule's problems its conditions quote.
const problemsShown = 10

// joinProblems quotes the first problemsShown problems and counts the rest: a rule naming
// a hundred resources before their CRDs are installed would otherwise make a message longer
// than a condition may hold.
func joinProblems(problems []string) string {
	msg := strings.Join(problems[:min(len(problems), problemsShown)], "; ")
	if more := len(problems) - problemsShown; more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return msg
}

// shownResource is how status.resources names a resource: its apiVersion and plural, as
// in `v1/configmaps` or `apps/v1/deployments`, the forms a manifest uses.
func shownResource(gvr schema.GroupVersionResource) string {
	return gvr.GroupVersion().String() + "/" + gvr.Resource
}

// applyResult records the outcome on a rule's status and says when to look again: a
// problem a human must fix makes the rule Stalled, whatever else is going on (the message
// names that too); a resource waiting for an API that failed discovery makes it
// Reconciling with ResourcesResolved False; resources kept through such a failure (kept
// names them) make it Reconciling with every named resource resolved.
func applyResult(st *v1alpha1.WatchRuleStatus, gen int64, c compiled, kept string, l listing) ctrl.Result {
	st.Resources = nil
	for _, claim := range c.claims {
		st.Resources = append(st.Resources, shownResource(claim.Resource.GVR))
	}
	transient := c.waiting
	if kept != "" {
		transient = append(slices.Clip(transient), kept)
	}
	switch {
	case len(c.stalled) > 0:
		msg := joinProblems(append(slices.Clip(c.stalled), transient...))
		v1alpha1.SetCondition(&st.Conditions, gen, v1alpha1.ConditionResourcesResolved, false, v1alpha1.ReasonResourceNotFound, msg)
		v1alpha1.SetStalled(&st.Conditions, gen, v1alpha1.ReasonResourceNotFound, msg)
		return ctrl.Result{RequeueAfter: min(unresolvedRetry, discoveryRetry)}
	case len(c.waiting) > 0:
		msg := joinProblems(transient)
		v1alpha1.SetCondition(&st.Conditions, gen, v1alpha1.ConditionResourcesResolved, false, v1alpha1.ReasonDiscoveryFailed, msg)
		v1alpha1.SetReconciling(&st.Conditions, gen, v1alpha1.ReasonDiscoveryFailed, msg)
		return ctrl.Result{RequeueAfter: discoveryRetry}
	}
	v1alpha1.SetCondition(&st.Conditions, gen, v1alpha1.ConditionResourcesResolved, true, v1alpha1.ReasonSucceeded, fmt.Sprintf("%d resource(s) resolved", len(c.claims)))
	if len(l.problems) > 0 {
		msg := joinProblems(l.problems) + ": nothing of it is captured until it lists, and the target's snapshots wait for it"
		if kept != "" {
			msg += "; " + kept
		}
		v1alpha1.SetReconciling(&st.Conditions, gen, v1alpha1.ReasonListFailed, msg)
		return ctrl.Result{RequeueAfter: listRetry}
	}
	if kept != "" {
		v1alpha1.SetReconciling(&st.Conditions, gen, v1alpha1.ReasonDiscoveryFailed, kept)
		return ctrl.Result{RequeueAfter: discoveryRetry}
	}
	v1alpha1.SetReady(&st.Conditions, gen, v1alpha1.ReasonSucceeded, fmt.Sprintf("watching %d resource(s)", len(c.claims)))
	if l.pending {
		return ctrl.Result{RequeueAfter: listCheck} // to say so should its first list fail
	}
	return ctrl.Result{}
}

// listing is what the watcher says of the lists of a rule's resources (ListProblems).
type listing struct {
	problems []string
	pending  bool
}

// listingOf asks reg about the lists of the resources of claims.
func listingOf(reg Registry, claims []watcher.Claim) listing {
	var gvrs []schema.GroupVersionResource
	for _, c := range claims {
		if !slices.Contains(gvrs, c.Resource.GVR) {
			gvrs = append(gvrs, c.Resource.GVR)
		}
	}
	problems, pending := reg.ListProblems(gvrs)
	return listing{problems: problems, pending: pending}
}

// listRetry is how soon a rule whose resource cannot be listed looks again; listCheck how
// soon one whose resources are still listing looks whether they did.
const (
	listRetry = time.Minute
	listCheck = 15 * time.Second
)

// crdEvents re-reconciles every rule of a kind when CRDs change, so rules naming a
// resource that did not exist yet are picked up once its CRD is installed, and notes the
// change on d's clock (crdClock.recheck, needsRefresh).
func crdEvents(list func(ctx context.Context) []reconcile.Request, d *Discovery) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		d.crds.changed(time.Now())
		return list(ctx)
	})
}

// crdClock remembers when a CRD last changed. The API server adds a CRD to discovery only
// once it has seen the CRD Established, which may come after the rule's reconcile read
// discovery (on a control plane of several API servers each learns on its own), and a
// rule taking every resource, or one whose CRD's served version moved, has no unresolved
// name to retry: a rule reconciled soon after a change looks again once discovery had time
// to catch up with the last change of a burst (a chart installing many CRDs).
type crdClock struct{ last atomic.Int64 }

// changed records a CRD change at now.
func (c *crdClock) changed(now time.Time) { c.last.Store(now.UnixNano()) }

// at is when a CRD last changed, zero before any did.
func (c *crdClock) at() time.Time {
	if last := c.last.Load(); last != 0 {
		return time.Unix(0, last)
	}
	return time.Time{}
}

// recheck returns res, requeued for discoveryLag after the last CRD change when that is
// still ahead at now and sooner than res asks.
func (c *crdClock) recheck(res ctrl.Result, now time.Time) ctrl.Result {
	last := c.last.Load()
	if last == 0 {
		return res
	}
	if due := time.Unix(0, last).Add(discoveryLag).Sub(now); due > 0 && (res.RequeueAfter == 0 || due < res.RequeueAfter) {
		res.RequeueAfter = due
	}
	return res
}

// discoveryLag is how long after a CRD change rules look at discovery again.
const discoveryLag = 5 * time.Second
