package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gitops-reverser/gitops-reverser/watcher"
)

func rt(groups, resources []string, create, update, del bool) route {
	return route{target: types.NamespacedName{Namespace: "a", Name: "t"}, groups: set(groups), resources: set(resources),
		namespace: "a", objects: labels.Everything(), create: create, update: update, del: del}
}

func TestDesiredRules(t *testing.T) {
	cases := []struct {
		name   string
		routes []route
		want   []RuleSpec
	}{
		{"has no rules when nothing is watched", nil, []RuleSpec{}},
		{"merges resources of one group with the same operations", []route{
			rt([]string{""}, []string{"configmaps"}, true, true, true),
			rt([]string{""}, []string{"services"}, true, true, true),
		}, []RuleSpec{rule("", []string{"configmaps", "services"}, admissionv1.Create, admissionv1.Update, admissionv1.Delete)}},
		{"judges updates of a rule without UPDATE that mirrors deletes, since leaving a selector is a delete", []route{
			rt([]string{"apps"}, []string{"deployments"}, true, false, true),
		}, []RuleSpec{rule("apps", []string{"deployments"}, admissionv1.Create, admissionv1.Update, admissionv1.Delete)}},
		{"judges updates of a rule with only CREATE, since moving into its selector is a create", []route{
			rt([]string{""}, []string{"secrets"}, true, false, false),
		}, []RuleSpec{rule("", []string{"secrets"}, admissionv1.Create, admissionv1.Update)}},
		{"unions the operations of two rules on one resource", []route{
			rt([]string{""}, []string{"configmaps"}, true, false, false),
			rt([]string{""}, []string{"configmaps"}, false, true, false),
		}, []RuleSpec{rule("", []string{"configmaps"}, admissionv1.Create, admissionv1.Update)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredRules(tc.routes)
			if len(tc.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRulesFor(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	deploy := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	t.Run("names exactly the resources the watcher resolved, never *", func(t *testing.T) {
		got := RulesFor([]watcher.WatchedResource{
			{GVR: cm, Create: true, Update: true, Delete: true},
			{GVR: secrets, Create: true, Update: true, Delete: true},
			{GVR: deploy, Create: true},
		})
		assert.ElementsMatch(t, []RuleSpec{
			rule("", []string{"configmaps", "secrets"}, admissionv1.Create, admissionv1.Update, admissionv1.Delete),
			rule("apps", []string{"deployments"}, admissionv1.Create, admissionv1.Update),
		}, got)
	})
	t.Run("has no rules when nothing is watched", func(t *testing.T) {
		assert.Empty(t, RulesFor(nil))
	})
}

func TestNamespaceScope(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deploy := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	roles := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	watched := []watcher.WatchedResource{
		{GVR: cm, Create: true, Namespaces: []string{"team-a", "team-b"}},
		{GVR: deploy, Create: true, Namespaces: []string{"team-a"}},
		{GVR: roles, Create: true},
	}
	t.Run("scopes only resources every claim of which names its namespace", func(t *testing.T) {
		assert.Equal(t, map[schema.GroupResource][]string{
			cm.GroupResource():     {"team-a", "team-b"},
			deploy.GroupResource(): {"team-a"},
		}, NamespacesFor(watched))
	})
	t.Run("sends a scoped resource's writes only from its namespaces, in one condition", func(t *testing.T) {
		c := namespaceCondition(NamespacesFor(watched))
		require.NotNil(t, c)
		assert.Equal(t, "only-watched-namespaces", c.Name)
		assert.Equal(t, `!((request.resource.group + '/' + request.resource.resource) in ["/configmaps", "apps/deployments"]) || `+
			`(request.resource.group + '/' + request.resource.resource + '/' + request.namespace) in ["/configmaps/team-a", "/configmaps/team-b", "apps/deployments/team-a"]`,
			c.Expression)
	})
	t.Run("merges two versions of one resource, and scopes none when one takes any namespace", func(t *testing.T) {
		v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
		v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
		assert.Equal(t, map[schema.GroupResource][]string{v1.GroupResource(): {"team-a", "team-b"}},
			NamespacesFor([]watcher.WatchedResource{{GVR: v2, Namespaces: []string{"team-b"}}, {GVR: v1, Namespaces: []string{"team-a"}}}))
		assert.Empty(t, NamespacesFor([]watcher.WatchedResource{{GVR: v2, Namespaces: []string{"team-b"}}, {GVR: v1}}))
	})
	t.Run("scopes nothing rather than outgrow the API server's limit on an expression", func(t *testing.T) {
		many := make([]string, maxScopedPairs+1)
		for i := range many {
			many[i] = fmt.Sprintf("team-%04d", i)
		}
		assert.Nil(t, NamespacesFor([]watcher.WatchedResource{{GVR: cm, Namespaces: many}}))
		assert.Len(t, NamespacesFor([]watcher.WatchedResource{{GVR: cm, Namespaces: many[:maxScopedPairs]}}), 1)
		long := schema.GroupVersionResource{Group: strings.Repeat("g", 200) + ".example.com", Version: "v1", Resource: "widgets"}
		longNames := make([]string, 400)
		for i := range longNames {
			longNames[i] = fmt.Sprintf("%060d", i) // 63 characters with the prefix below
			longNames[i] = "ns-" + longNames[i]
		}
		scoped := NamespacesFor([]watcher.WatchedResource{{GVR: long, Namespaces: longNames}})
		if scoped != nil {
			assert.Less(t, utf8.RuneCountInString(namespaceCondition(scoped).Expression), 100_000,
				"under the API server's limit on a CEL expression")
		}
		assert.Nil(t, scoped, "400 pairs of a long group and 63-character namespaces pass 90,000 characters: sent from every namespace")
	})
	t.Run("adds no condition when no resource is scoped", func(t *testing.T) {
		assert.Nil(t, namespaceCondition(NamespacesFor([]watcher.WatchedResource{{GVR: roles, Create: true}})))
	})
	t.Run("puts the condition on both entries, before the skip conditions", func(t *testing.T) {
		p := WebhookPolicy{SkipUsers: []string{"op", "flux"}, Self: "op", Scoped: NamespacesFor(watched)}
		var judged, recorded admissionv1.ValidatingWebhook
		ApplyPolicy(&judged, RulesFor(watched), p)
		ApplyRecordPolicy(&recorded, RulesFor(watched), p)
		for _, w := range []admissionv1.ValidatingWebhook{judged, recorded} {
			require.NotEmpty(t, w.MatchConditions)
			assert.Equal(t, "only-watched-namespaces", w.MatchConditions[0].Name)
		}
		assert.Len(t, judged.MatchConditions, 2)
		assert.Len(t, recorded.MatchConditions, 3)
	})
}

func rule(group string, resources []string, ops ...admissionv1.OperationType) RuleSpec {
	return RuleSpec{Operations: ops, Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources, Scope: ptr.To(admissionv1.AllScopes)}}
}

func TestApplyPolicyLeavesClientConfigAlone(t *testing.T) {
	w := admissionv1.ValidatingWebhook{Name: WatchedWebhookName, ClientConfig: admissionv1.WebhookClientConfig{
		Service: &admissionv1.ServiceReference{Namespace: "ops", Name: "gitops-reverser"}, CABundle: []byte("ca")}}
	orig := w.ClientConfig.DeepCopy()
	p := WebhookPolicy{ExcludedNamespaces: []string{"kube-system", "kube-node-lease", "ops"}, SkipUsers: []string{"system:serviceaccount:ops:gitops-reverser"},
		SkipFieldManagers: []string{"kustomize-controller"}, FailurePolicy: admissionv1.Ignore, TimeoutSecond: 3}
	rules := []RuleSpec{rule("", []string{"configmaps"}, admissionv1.Create)}
	require.True(t, ApplyPolicy(&w, rules, p), "the first apply changes the entry")
	assert.Equal(t, *orig, w.ClientConfig)
	assert.Equal(t, rules, w.Rules)
	assert.Equal(t, admissionv1.SideEffectClassNone, *w.SideEffects)
	assert.Equal(t, int32(3), *w.TimeoutSeconds)
	assert.Equal(t, []string{"kube-system", "kube-node-lease", "ops"}, w.NamespaceSelector.MatchExpressions[0].Values)
	assert.Equal(t, `!(request.userInfo.username in ["system:serviceaccount:ops:gitops-reverser"])`, w.MatchConditions[0].Expression)
	assert.Equal(t, `!(request.userInfo.username.startsWith('system:serviceaccount:') && has(request.options) && `+
		`has(request.options.fieldManager) && request.options.fieldManager in ["kustomize-controller"])`,
		w.MatchConditions[1].Expression)
	assert.False(t, ApplyPolicy(&w, rules, p), "applying the same policy again changes nothing")

	p.SkipOwned = true // --capture-owned-objects off
	require.True(t, ApplyPolicy(&w, rules, p))
	assert.Equal(t, "skip-owned-objects", w.MatchConditions[0].Name, "an owned object's writes are not sent")
	p.SkipOwned = false
	require.True(t, ApplyPolicy(&w, rules, p))
	assert.NotContains(t, w.MatchConditions, ownedCondition, "captured owned objects are sent")
}

func TestRouteMatches(t *testing.T) {
	nsLabels := func(ns string) labels.Set {
		if ns == "prod" {
			return labels.Set{"env": "prod"}
		}
		return labels.Set{}
	}
	cmReq := func(op Operation, ns string) Request {
		return Request{Operation: op, Resource: schema.GroupResource{Resource: "configmaps"}, Namespace: ns}
	}
	ns := rt([]string{""}, []string{"configmaps"}, true, true, true)
	sel := ns
	sel.objects = labels.SelectorFromSet(labels.Set{"gitops": "on"})
	cluster := route{groups: set([]string{""}), resources: set([]string{"configmaps"}), cluster: true, objects: labels.Everything(),
		nsSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), create: true, update: true, del: true}
	noDelete := rt([]string{""}, []string{"configmaps"}, true, true, false)
	createOnly := sel
	createOnly.update, createOnly.del = false, false
	deleteOnly := sel
	deleteOnly.create, deleteOnly.update = false, false
	anything := rt([]string{"*"}, []string{"*"}, true, true, true)
	cases := []struct {
		name     string
		route    route
		req      Request
		obj, old labels.Set
		want     bool
	}{
		{"routes a create in the rule's namespace", ns, cmReq(Create, "a"), labels.Set{}, nil, true},
		{"ignores other namespaces", ns, cmReq(Create, "b"), labels.Set{}, nil, false},
		{"ignores other resources", ns, Request{Operation: Create, Resource: schema.GroupResource{Resource: "secrets"}, Namespace: "a"}, labels.Set{}, nil, false},
		{"honours the objectSelector", sel, cmReq(Create, "a"), labels.Set{}, nil, false},
		{"routes an update that leaves the selector, as Git sees a delete", sel, cmReq(Update, "a"), labels.Set{}, labels.Set{"gitops": "on"}, true},
		{"routes a cluster rule by namespace labels", cluster, cmReq(Create, "prod"), labels.Set{}, nil, true},
		{"skips namespaces the cluster rule does not select", cluster, cmReq(Create, "dev"), labels.Set{}, nil, false},
		{"does not judge deletes a rule does not mirror", noDelete, cmReq(Delete, "a"), nil, labels.Set{}, false},
		{"routes an update into the selector of a rule with only CREATE, as the watcher writes it", createOnly, cmReq(Update, "a"), labels.Set{"gitops": "on"}, labels.Set{}, true},
		{"does not route an update within the selector of a rule with only CREATE", createOnly, cmReq(Update, "a"), labels.Set{"gitops": "on"}, labels.Set{"gitops": "on"}, false},
		{"does not judge a plain update for a rule with only DELETE", deleteOnly, cmReq(Update, "a"), labels.Set{"gitops": "on"}, labels.Set{"gitops": "on"}, false},
		{"routes an update out of the selector of a rule with only DELETE", deleteOnly, cmReq(Update, "a"), labels.Set{}, labels.Set{"gitops": "on"}, true},
		{"routes any resource of a * rule", anything, cmReq(Create, "a"), labels.Set{}, nil, true},
		{"never judges Events for a * rule, which the watcher leaves out too", anything,
			Request{Operation: Create, Resource: schema.GroupResource{Resource: "events"}, Namespace: "a"}, labels.Set{}, nil, false},
		{"never judges Leases for a * rule", anything,
			Request{Operation: Update, Resource: schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, Namespace: "a"}, labels.Set{}, labels.Set{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.route.routes(tc.req, tc.obj, tc.old, nsLabels))
		})
	}
}

func TestTargetsMarksAnUpdateLeavingOnlyWhenNoRuleOfTheTargetSelectsTheObject(t *testing.T) {
	key := types.NamespacedName{Namespace: "a", Name: "t"}
	selecting := func(l labels.Set, create, update, del bool) route {
		r := rt([]string{""}, []string{"secrets"}, create, update, del)
		r.objects = labels.SelectorFromSet(l)
		return r
	}
	deleteApp := selecting(labels.Set{"app": "a"}, false, false, true)
	createTier := selecting(labels.Set{"tier": "x"}, true, false, false)
	upd := Request{Operation: Update, Resource: schema.GroupResource{Resource: "secrets"}, Namespace: "a", Name: "db"}
	cases := []struct {
		name     string
		routes   []route
		obj, old labels.Set
		leaving  bool
	}{
		{name: "is leaving when the update moves the object out of the only rule that selected it",
			routes: []route{deleteApp}, obj: labels.Set{}, old: labels.Set{"app": "a"}, leaving: true},
		{name: "is not leaving when another rule of the target still selects the object, which the writer then writes",
			routes: []route{deleteApp, createTier}, obj: labels.Set{"tier": "x"}, old: labels.Set{"app": "a", "tier": "x"}, leaving: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := NewView(nil, logr.Discard())
			v.snap.Store(&snapshot{routes: tc.routes, targets: map[types.NamespacedName]TargetState{key: {Key: key}}})
			got := v.Targets(context.Background(), upd, tc.obj, tc.old)
			require.Len(t, got, 1)
			assert.Equal(t, tc.leaving, got[0].Leaving)
		})
	}
}

func TestApplyRecordPolicy(t *testing.T) {
	rules := []RuleSpec{rule("", []string{"configmaps"}, admissionv1.Create, admissionv1.Update, admissionv1.Delete)}
	policy := WebhookPolicy{ExcludedNamespaces: []string{"kube-system"}, Self: "system:serviceaccount:ops:reverser",
		SkipUsers:         []string{"system:serviceaccount:ops:reverser", "system:serviceaccount:flux-system:kustomize-controller"},
		SkipFieldManagers: []string{"kustomize-controller"}, FailurePolicy: admissionv1.Fail, TimeoutSecond: 3}
	scale := rule("", []string{"configmaps/scale"}, admissionv1.Update)
	t.Run("records exactly the writes the watched entry skips and scale writes, never the operator's, and fails open", func(t *testing.T) {
		var w admissionv1.ValidatingWebhook
		assert.True(t, ApplyRecordPolicy(&w, rules, policy))
		assert.Equal(t, append(slices.Clone(rules), scale), w.Rules)
		assert.Equal(t, admissionv1.Ignore, *w.FailurePolicy, "never blocks a GitOps controller, whatever the watched entry's policy")
		require.Len(t, w.MatchConditions, 2)
		assert.Equal(t, `(has(request.subResource) && request.subResource == "scale") || `+
			`request.userInfo.username in ["system:serviceaccount:flux-system:kustomize-controller"] || `+
			`(request.userInfo.username.startsWith('system:serviceaccount:') && has(request.options) && `+
			`has(request.options.fieldManager) && request.options.fieldManager in ["kustomize-controller"])`,
			w.MatchConditions[0].Expression)
		assert.Equal(t, `request.userInfo.username != "system:serviceaccount:ops:reverser"`, w.MatchConditions[1].Expression)
		assert.False(t, ApplyRecordPolicy(&w, rules, policy), "nothing changes the second time")
	})
	t.Run("takes only scale writes when nothing but the operator is skipped", func(t *testing.T) {
		var w admissionv1.ValidatingWebhook
		ApplyRecordPolicy(&w, rules, WebhookPolicy{Self: "me", SkipUsers: []string{"me"}, TimeoutSecond: 3})
		assert.Equal(t, []RuleSpec{scale}, w.Rules)
		require.Len(t, w.MatchConditions, 2)
		assert.Equal(t, `(has(request.subResource) && request.subResource == "scale")`, w.MatchConditions[0].Expression)
	})
	t.Run("gets no rules when nothing is updated and nothing skipped", func(t *testing.T) {
		var w admissionv1.ValidatingWebhook
		created := []RuleSpec{rule("", []string{"configmaps"}, admissionv1.Create)}
		ApplyRecordPolicy(&w, created, WebhookPolicy{Self: "me", SkipUsers: []string{"me"}, TimeoutSecond: 3})
		assert.Empty(t, w.Rules)
		assert.Empty(t, w.MatchConditions)
	})
}

func TestScaleRules(t *testing.T) {
	rules := []RuleSpec{
		rule("apps", []string{"deployments", "statefulsets"}, admissionv1.Create, admissionv1.Update),
		rule("", []string{"configmaps"}, admissionv1.Create),
		rule("example.com", []string{"*"}, admissionv1.Update, admissionv1.Delete),
	}
	assert.Equal(t, []RuleSpec{
		rule("apps", []string{"deployments/scale", "statefulsets/scale"}, admissionv1.Update),
		rule("example.com", []string{"*/scale"}, admissionv1.Update),
	}, ScaleRules(rules), "the scale writes of what is updated, a wildcard's included; nothing for create-only rules")
	assert.Equal(t, []string{"deployments", "statefulsets"}, rules[0].Resources, "the watched rules are left as they are")
}

func TestRuleSyncWaitsForANewLeadersWatcher(t *testing.T) {
	t.Run("leaves the configuration alone until the watcher has loaded every rule", func(t *testing.T) {
		// No client: a sync that reached the API server would fail with a nil dereference.
		s := NewRuleSync(nil, nil, "gitops-reverser", WebhookPolicy{}, logr.Discard())
		s.Loaded = func() bool { return false }
		s.started = time.Now()
		assert.ErrorIs(t, s.sync(context.Background()), errRulesLoading)
		assert.False(t, s.loaded)
	})
	t.Run("stops waiting once every rule is loaded, or after the deadline", func(t *testing.T) {
		no, yes := func() bool { return false }, func() bool { return true }
		assert.True(t, waitForRules(no, time.Second))
		assert.False(t, waitForRules(yes, time.Second))
		assert.False(t, waitForRules(no, loadDeadline), "a rule that never registers must not freeze the rules")
		assert.False(t, waitForRules(nil, 0))
	})
}

func TestARefusedSyncSaysWhatToGrant(t *testing.T) {
	gr := schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}
	refused := apierrors.NewForbidden(gr, "reverser-prod", errors.New(`cannot update resource "validatingwebhookconfigurations"`))
	err := forbiddenHint(refused, "reverser-prod")
	assert.True(t, apierrors.IsForbidden(err), "still the API server's answer")
	assert.Contains(t, err.Error(), "grant the operator's ClusterRole update on ValidatingWebhookConfiguration reverser-prod")
	other := errors.New("connection refused")
	assert.Same(t, other, forbiddenHint(other, "reverser-prod"), "other errors are left as they are")
}

func TestRelabelledListsWhatANamespacesNewLabelsMoveIntoOrOutOfEachTarget(t *testing.T) {
	prod, dev := types.NamespacedName{Namespace: "ops", Name: "prod"}, types.NamespacedName{Namespace: "ops", Name: "dev"}
	byLabels := func(target types.NamespacedName, sel labels.Set, resources []string, create, update, del bool) route {
		return route{target: target, groups: set([]string{""}), resources: set(resources), cluster: true, objects: labels.Everything(),
			nsSelector: labels.SelectorFromSet(sel), create: create, update: update, del: del}
	}
	local := rt([]string{""}, []string{"configmaps"}, true, true, true)
	local.target = prod
	routes := []route{
		byLabels(prod, labels.Set{"env": "prod"}, []string{"configmaps"}, true, true, true),
		byLabels(prod, labels.Set{"env": "prod"}, []string{"secrets"}, true, false, false),
		byLabels(prod, labels.Set{"team": "a"}, []string{"services"}, false, false, true),
		byLabels(dev, labels.Set{"env": "dev"}, []string{"configmaps"}, true, true, true),
		local,
	}
	v := NewView(nil, logr.Discard())
	v.snap.Store(&snapshot{routes: routes, targets: map[types.NamespacedName]TargetState{prod: {Key: prod}, dev: {Key: dev}}})
	cm, secret, svc := schema.GroupResource{Resource: "configmaps"}, schema.GroupResource{Resource: "secrets"}, schema.GroupResource{Resource: "services"}
	cases := []struct {
		name     string
		old, now labels.Set
		want     []Move
	}{
		{"moves nothing when no selector changes its answer", labels.Set{"env": "prod"}, labels.Set{"env": "prod", "x": "y"}, nil},
		{"brings objects into the rules that take them in, by target, where the rule creates or updates",
			labels.Set{"team": "a"}, labels.Set{"env": "prod"},
			[]Move{{Target: TargetState{Key: prod}, Joins: true, Resources: []schema.GroupResource{cm, secret}},
				{Target: TargetState{Key: prod}, Resources: []schema.GroupResource{svc}}}},
		{"takes objects out only where the rule deletes", labels.Set{"env": "prod"}, labels.Set{},
			[]Move{{Target: TargetState{Key: prod}, Resources: []schema.GroupResource{cm}}}},
		{"moves objects from one target to another", labels.Set{"env": "prod"}, labels.Set{"env": "dev"},
			[]Move{{Target: TargetState{Key: prod}, Resources: []schema.GroupResource{cm}}, {Target: TargetState{Key: dev}, Joins: true, Resources: []schema.GroupResource{cm}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, v.Relabelled("team-x", tc.old, tc.now))
		})
	}

	t.Run("moves nothing another rule of the target takes from the namespace on both sides", func(t *testing.T) {
		byEnv := byLabels(prod, labels.Set{"env": "prod"}, []string{"configmaps"}, true, true, true)
		byTeam := byLabels(prod, labels.Set{"team": "a"}, []string{"*"}, true, true, true)
		chosen := byTeam
		chosen.objects = labels.SelectorFromSet(labels.Set{"gitops": "on"})
		v.snap.Store(&snapshot{routes: []route{byEnv, byTeam, local}, targets: map[types.NamespacedName]TargetState{prod: {Key: prod}}})
		assert.Empty(t, v.Relabelled("team-x", labels.Set{"env": "prod", "team": "a"}, labels.Set{"team": "a"}), "leaving one rule, still in the other")
		assert.Empty(t, v.Relabelled("team-x", labels.Set{"team": "a"}, labels.Set{"env": "prod", "team": "a"}), "joining one rule, already in the other")
		assert.Empty(t, v.Relabelled("a", labels.Set{"env": "prod"}, labels.Set{}), "a WatchRule of the namespace keeps its ConfigMaps")
		teamConfigMaps := byLabels(prod, labels.Set{"team": "a"}, []string{"configmaps"}, true, true, true)
		v.snap.Store(&snapshot{routes: []route{byEnv, teamConfigMaps}, targets: map[types.NamespacedName]TargetState{prod: {Key: prod}}})
		assert.Empty(t, v.Relabelled("team-x", labels.Set{"team": "a"}, labels.Set{"env": "prod"}), "swapping one rule for another of the target keeps its ConfigMaps there")
		v.snap.Store(&snapshot{routes: []route{byEnv, chosen}, targets: map[types.NamespacedName]TargetState{prod: {Key: prod}}})
		assert.Equal(t, []Move{{Target: TargetState{Key: prod}, Resources: []schema.GroupResource{cm}}},
			v.Relabelled("team-x", labels.Set{"env": "prod", "team": "a"}, labels.Set{"team": "a"}),
			"a rule that keeps only some objects by their labels lets the others leave")

		deletesOnly := local
		deletesOnly.create, deletesOnly.update = false, false
		createOnly := local
		createOnly.update, createOnly.del = false, false
		for _, other := range []route{deletesOnly, createOnly} {
			v.snap.Store(&snapshot{routes: []route{byEnv, other}, targets: map[types.NamespacedName]TargetState{prod: {Key: prod}}})
			assert.Equal(t, []Move{{Target: TargetState{Key: prod}, Joins: true, Resources: []schema.GroupResource{cm}}},
				v.Relabelled("a", labels.Set{}, labels.Set{"env": "prod"}),
				"joining writes every object again, more than a rule that never wrote them, or only created them, did")
		}
		v.snap.Store(&snapshot{routes: []route{byEnv, deletesOnly}, targets: map[types.NamespacedName]TargetState{prod: {Key: prod}}})
		assert.Empty(t, v.Relabelled("a", labels.Set{"env": "prod"}, labels.Set{}), "leaving removes nothing another rule selects, whatever it mirrors")

		events := byLabels(prod, labels.Set{"env": "prod"}, []string{"events"}, true, true, true)
		everything := byTeam
		everything.nsSelector = labels.Everything()
		v.snap.Store(&snapshot{routes: []route{events, everything}, targets: map[types.NamespacedName]TargetState{prod: {Key: prod}}})
		assert.Equal(t, []Move{{Target: TargetState{Key: prod}, Resources: []schema.GroupResource{{Resource: "events"}}}},
			v.Relabelled("team-x", labels.Set{"env": "prod"}, labels.Set{}), "a * rule does not take Events, as the watcher's does not")
	})

	v.snap.Store(&snapshot{routes: routes})
	assert.True(t, v.selectsNamespaces())
	every := byLabels(prod, labels.Set{}, []string{"configmaps"}, true, true, true)
	v.snap.Store(&snapshot{routes: []route{local, every}})
	assert.False(t, v.selectsNamespaces(), "a WatchRule takes one namespace, whatever its labels, and {} takes every one")
}

func TestANamespaceSelectorSendsOnlyTheRelabelsOfNamespaces(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	assert.False(t, RelabelsFor([]watcher.WatchedResource{{GVR: cm, Create: true}}))
	assert.True(t, RelabelsFor([]watcher.WatchedResource{{GVR: cm, Create: true}, {GVR: cm, Update: true, ByNamespaceLabels: true}}))

	p := WebhookPolicy{FailurePolicy: admissionv1.Fail, TimeoutSecond: 5, Relabels: true}
	rules := make([]RuleSpec, 1, 2) // room to append in place, which must not happen
	rules[0] = rule("", []string{"configmaps"}, admissionv1.Create, admissionv1.Update)
	var w admissionv1.ValidatingWebhook
	require.True(t, ApplyPolicy(&w, rules, p))
	assert.Equal(t, append(slices.Clone(rules), rule("", []string{"namespaces"}, admissionv1.Update)), w.Rules)
	assert.Contains(t, w.MatchConditions, relabelCondition)
	assert.Zero(t, rules[:2][1], "the caller's rules, and the room after them, are left as they were")
	assert.False(t, ApplyPolicy(&w, rules, p), "applying the same policy again changes nothing")

	watched := []RuleSpec{rule("", []string{"configmaps", "namespaces"}, admissionv1.Create, admissionv1.Update)}
	require.True(t, ApplyPolicy(&w, watched, p))
	assert.Equal(t, watched, w.Rules, "a rule that watches namespaces already sends every update of one")
	assert.NotContains(t, w.MatchConditions, relabelCondition, "nor narrows them to relabels")

	p.Relabels = false
	require.True(t, ApplyPolicy(&w, rules, p))
	assert.Equal(t, rules, w.Rules)
	assert.NotContains(t, w.MatchConditions, relabelCondition)
}
