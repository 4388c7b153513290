package watcher

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func discoveryFixture() []*metav1.APIResourceList {
	rw := metav1.Verbs{"get", "list", "watch", "create", "update", "delete"}
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: rw},
			{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: rw},
			{Name: "pods/log", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"get"}},
			{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: metav1.Verbs{"create"}},
			{Name: "events", Kind: "Event", Namespaced: true, Verbs: rw},
		}},
		{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "leases", Kind: "Lease", Namespaced: true, Verbs: rw},
		}},
		{GroupVersion: "coordination.k8s.io/v1beta1", APIResources: []metav1.APIResource{
			{Name: "leasecandidates", Kind: "LeaseCandidate", Namespaced: true, Verbs: rw},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: rw},
		}},
		{GroupVersion: "rbac.authorization.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "clusterroles", Kind: "ClusterRole", Namespaced: false, Verbs: rw},
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "nodes", Kind: "Node", Namespaced: false, Verbs: rw},
		}},
		{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "volumeattachments", Kind: "VolumeAttachment", Namespaced: false, Verbs: rw},
		}},
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name     string
		rule     v1alpha1.ResourceRule
		scope    Scope
		want     []string
		problems []string
	}{
		{"resolves a core resource by plural name", v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"configmaps"}}, WatchRuleScope,
			[]string{"/v1, Resource=configmaps"}, nil},
		{"expands * to the watchable resources of the group, skipping subresources, unwatchable ones and events",
			v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"*"}}, WatchRuleScope,
			[]string{"/v1, Resource=configmaps", "/v1, Resource=secrets"}, nil},
		{"reads groups × resources as RBAC does: a combination the server lacks is no problem",
			v1alpha1.ResourceRule{APIGroups: []string{"", "apps"}, Resources: []string{"configmaps", "deployments", "secrets"}}, WatchRuleScope,
			[]string{"/v1, Resource=configmaps", "/v1, Resource=secrets", "apps/v1, Resource=deployments"}, nil},
		{"names a resource that none of the groups has",
			v1alpha1.ResourceRule{APIGroups: []string{"", "apps"}, Resources: []string{"configmaps", "widgets"}}, WatchRuleScope,
			[]string{"/v1, Resource=configmaps"}, []string{`widgets not found on the server in any of the groups "", "apps"` + notFoundHint}},
		{"takes with * in a namespaced rule only namespaced resources, leaving out the cluster's runtime state",
			v1alpha1.ResourceRule{APIGroups: []string{"*"}, Resources: []string{"*"}}, WatchRuleScope,
			[]string{"/v1, Resource=configmaps", "/v1, Resource=secrets", "apps/v1, Resource=deployments"}, nil},
		{"takes with * in a cluster rule cluster-scoped resources too",
			v1alpha1.ResourceRule{APIGroups: []string{"*"}, Resources: []string{"*"}}, Scope{Namespaced: true, ClusterScoped: true},
			[]string{"/v1, Resource=configmaps", "/v1, Resource=secrets", "apps/v1, Resource=deployments", "rbac.authorization.k8s.io/v1, Resource=clusterroles"}, nil},
		{"takes with * in a cluster rule without a namespaceSelector only cluster-scoped resources, never nodes or volume attachments",
			v1alpha1.ResourceRule{APIGroups: []string{"*"}, Resources: []string{"*"}}, Scope{ClusterScoped: true},
			[]string{"rbac.authorization.k8s.io/v1, Resource=clusterroles"}, nil},
		{"asks for a namespaceSelector when a cluster rule without one names a namespaced resource",
			v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"configmaps"}}, Scope{ClusterScoped: true},
			nil, []string{"configmaps is namespaced: set namespaceSelector ({} for all namespaces)"}},
		{"captures events and leases when a rule names them",
			v1alpha1.ResourceRule{APIGroups: []string{"", "coordination.k8s.io"}, Resources: []string{"events", "leases"}}, WatchRuleScope,
			[]string{"/v1, Resource=events", "coordination.k8s.io/v1, Resource=leases"}, nil},
		{"captures nodes when a cluster rule names them",
			v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"nodes"}}, Scope{ClusterScoped: true},
			[]string{"/v1, Resource=nodes"}, nil},
		{"names a resource the server does not have", v1alpha1.ResourceRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}, WatchRuleScope,
			nil, []string{"widgets.example.com not found on the server" + notFoundHint}},
		{"names a resource that cannot be watched", v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"bindings"}}, WatchRuleScope,
			nil, []string{"bindings is not watchable (needs list and watch)"}},
		{"refuses a cluster-scoped resource in a namespaced rule", v1alpha1.ResourceRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}}, WatchRuleScope,
			nil, []string{"clusterroles.rbac.authorization.k8s.io is cluster-scoped: use a ClusterWatchRule"}},
		{"accepts a cluster-scoped resource in a cluster rule", v1alpha1.ResourceRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}}, Scope{Namespaced: true, ClusterScoped: true},
			[]string{"rbac.authorization.k8s.io/v1, Resource=clusterroles"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := Resolve(tc.rule, discoveryFixture(), tc.scope)
			var names []string
			for _, r := range got {
				names = append(names, r.GVR.String())
			}
			assert.Equal(t, tc.want, names)
			var messages []string
			for _, p := range problems {
				messages = append(messages, p.Message)
			}
			assert.Equal(t, tc.problems, messages)
		})
	}
}

func TestClaimMatches(t *testing.T) {
	team := labels.SelectorFromSet(labels.Set{"team": "a"})
	nsLabels := func(ns string) labels.Set {
		if ns == "prod" {
			return labels.Set{"env": "prod"}
		}
		return nil
	}
	cm := Resource{Kind: "ConfigMap", Namespaced: true}
	cases := []struct {
		name   string
		claim  Claim
		ns     string
		labels labels.Set
		want   bool
	}{
		{"keeps a WatchRule claim to its own namespace", Claim{Resource: cm, Namespace: "a", ObjectSelector: labels.Everything()}, "b", nil, false},
		{"matches in its own namespace", Claim{Resource: cm, Namespace: "a", ObjectSelector: labels.Everything()}, "a", nil, true},
		{"honours the objectSelector", Claim{Resource: cm, Namespace: "a", ObjectSelector: team}, "a", labels.Set{"team": "b"}, false},
		{"selects namespaces by label for a cluster rule", Claim{Resource: cm, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything()}, "prod", nil, true},
		{"skips namespaces whose labels do not match", Claim{Resource: cm, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything()}, "dev", nil, false},
		{"ignores namespaces for cluster-scoped resources", Claim{Resource: Resource{Kind: "ClusterRole"}, ObjectSelector: labels.Everything()}, "", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.claim.Matches(tc.ns, tc.labels, nsLabels))
		})
	}
}

func TestOperations(t *testing.T) {
	c, u, d := Operations(nil)
	assert.True(t, c && u && d, "no operations means all")
	c, u, d = Operations([]v1alpha1.Operation{v1alpha1.OperationCreate, v1alpha1.OperationUpdate})
	assert.True(t, c && u)
	assert.False(t, d, "a rule without DELETE keeps files of deleted objects")
}

func TestSameClaims(t *testing.T) {
	cm := Resource{Kind: "ConfigMap", Namespaced: true}
	a := Claim{Resource: cm, Namespace: "a", ObjectSelector: labels.Everything(), Create: true}
	b := a
	b.ObjectSelector = labels.SelectorFromSet(labels.Set{"x": "y"})
	assert.True(t, sameClaims([]Claim{a}, []Claim{a}), "a re-reconcile with the same rule changes nothing")
	assert.False(t, sameClaims([]Claim{a}, []Claim{b}), "a new selector is a change")
	assert.False(t, sameClaims(nil, []Claim{a}))
}

func TestRegistered(t *testing.T) {
	wr, cwr := RuleKey("WatchRule", "team-a", "live"), RuleKey("ClusterWatchRule", "", "all")
	t.Run("names a namespaced rule by its namespace and a cluster rule without one", func(t *testing.T) {
		assert.Equal(t, "WatchRule/team-a/live", wr)
		assert.Equal(t, "ClusterWatchRule/all", cwr)
	})
	t.Run("is false until every rule has been set once, with or without claims", func(t *testing.T) {
		w := New(Options{Log: logr.Discard()})
		assert.True(t, w.Registered(nil), "no rules: nothing to wait for")
		assert.False(t, w.Registered([]string{wr, cwr}))
		w.SetRule(wr, nil) // a rule whose target is missing still counts as loaded
		assert.False(t, w.Registered([]string{wr, cwr}))
		w.SetRule(cwr, []Claim{{Resource: Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}, Create: true}})
		assert.True(t, w.Registered([]string{wr, cwr}))
	})
	t.Run("forgets a deleted rule's key with its claims", func(t *testing.T) {
		w := New(Options{Log: logr.Discard()})
		w.SetRule(cwr, []Claim{{Resource: Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}, Create: true}})
		w.ForgetRule(cwr)
		assert.Empty(t, w.Claims(cwr))
		assert.Empty(t, w.registered, "no trace of the gone rule")
		assert.False(t, w.Registered([]string{cwr}), "a rule of that name created again must be loaded again")
	})
}

func TestOwnershipSanitized(t *testing.T) {
	t.Run("keeps a Service's managedFields, which tell a pinned clusterIP from an allocated one", func(t *testing.T) {
		assert.True(t, ownershipSanitized(schema.GroupVersionResource{Version: "v1", Resource: "services"}))
	})
	t.Run("drops every other resource's, to save memory", func(t *testing.T) {
		assert.False(t, ownershipSanitized(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}))
		assert.False(t, ownershipSanitized(schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}))
	})
}

func TestWatchedNamesTheNamespacesOfWatchRules(t *testing.T) {
	cm := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}
	claim := func(ns string) Claim { return Claim{Resource: cm, Namespace: ns, Create: true} }
	t.Run("lists each WatchRule's namespace once, sorted", func(t *testing.T) {
		w := New(Options{Log: logr.Discard()})
		w.SetRule(RuleKey("WatchRule", "team-b", "r"), []Claim{claim("team-b")})
		w.SetRule(RuleKey("WatchRule", "team-a", "r"), []Claim{claim("team-a"), claim("team-a")})
		got := w.Watched()
		require.Len(t, got, 1)
		assert.Equal(t, []string{"team-a", "team-b"}, got[0].Namespaces)
	})
	t.Run("names none once a ClusterWatchRule takes the resource in any namespace", func(t *testing.T) {
		w := New(Options{Log: logr.Discard()})
		w.SetRule(RuleKey("WatchRule", "team-a", "r"), []Claim{claim("team-a")})
		w.SetRule(RuleKey("ClusterWatchRule", "", "all"), []Claim{claim("")})
		got := w.Watched()
		require.Len(t, got, 1)
		assert.Nil(t, got[0].Namespaces)
		assert.False(t, got[0].ByNamespaceLabels, "a claim without a namespaceSelector moves nothing on a relabel")
	})
	t.Run("says a namespaceSelector takes the resource, whose relabels admission judges", func(t *testing.T) {
		w := New(Options{Log: logr.Discard()})
		w.SetRule(RuleKey("WatchRule", "team-a", "r"), []Claim{claim("team-a")})
		selected := claim("")
		selected.NamespaceSelector = labels.SelectorFromSet(labels.Set{"mirror": "on"})
		w.SetRule(RuleKey("ClusterWatchRule", "", "mirrored"), []Claim{selected})
		got := w.Watched()
		require.Len(t, got, 1)
		assert.True(t, got[0].ByNamespaceLabels)
	})
	t.Run("does not for namespaceSelector {}, which no relabel flips", func(t *testing.T) {
		w := New(Options{Log: logr.Discard()})
		every := claim("")
		every.NamespaceSelector = labels.Everything()
		w.SetRule(RuleKey("ClusterWatchRule", "", "everywhere"), []Claim{every})
		got := w.Watched()
		require.Len(t, got, 1)
		assert.False(t, got[0].ByNamespaceLabels)
	})
}

func TestResolveTellsAMissingResourceFromOneItCannotCapture(t *testing.T) {
	rule := v1alpha1.ResourceRule{APIGroups: []string{"", "rbac.authorization.k8s.io"}, Resources: []string{"widgets", "clusterroles", "bindings"}}
	_, problems := Resolve(rule, discoveryFixture(), WatchRuleScope)
	missing := map[string]bool{}
	for _, p := range problems {
		missing[p.Name] = p.Missing
		assert.Equal(t, rule.APIGroups, p.Groups)
	}
	assert.Equal(t, map[string]bool{"widgets": true, "clusterroles": false, "bindings": false}, missing,
		"an API failing discovery may hide only the first")
}
