package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestRuleReadAccess(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		rules     []v1alpha1.ResourceRule
		want      []ReadAccess
	}{
		{
			name: "a WatchRule's author must list every resource it captures in its namespace", namespace: "team-a",
			rules: []v1alpha1.ResourceRule{{APIGroups: []string{"", "apps"}, Resources: []string{"secrets", "deployments"}}},
			want: []ReadAccess{
				{Verb: "list", Resource: "secrets", Namespace: "team-a"}, {Verb: "list", Resource: "deployments", Namespace: "team-a"},
				{Verb: "list", Group: "apps", Resource: "secrets", Namespace: "team-a"}, {Verb: "list", Group: "apps", Resource: "deployments", Namespace: "team-a"},
			},
		},
		{
			name:  "a ClusterWatchRule's author must list across every namespace, wildcards as such",
			rules: []v1alpha1.ResourceRule{{APIGroups: []string{"*"}, Resources: []string{"*"}}},
			want:  []ReadAccess{{Verb: "list", Group: "*", Resource: "*"}},
		},
		{
			name: "asks once for a resource named by two rules", namespace: "team-a",
			rules: []v1alpha1.ResourceRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}}, {APIGroups: []string{""}, Resources: []string{"configmaps"}}},
			want:  []ReadAccess{{Verb: "list", Resource: "configmaps", Namespace: "team-a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RuleReadAccess(tt.namespace, tt.rules))
		})
	}
}

func TestTargetReadAccess(t *testing.T) {
	target := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "live"}}
	assert.Empty(t, TargetReadAccess(target), "a target without encryption exposes nothing beyond its rules")
	target.Spec.Encryption = &v1alpha1.Encryption{}
	assert.Equal(t, []ReadAccess{{Verb: "get", Resource: "secrets", Namespace: "team-a"}}, TargetReadAccess(target),
		"whoever chooses the recipients can open every Secret the target writes")
	assert.Equal(t, "get secrets in namespace team-a", TargetReadAccess(target)[0].String())
	target.Spec.Encryption.Age = &v1alpha1.AgeEncryption{SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-age"}, GenerateWhenMissing: true}
	assert.Equal(t, []ReadAccess{{Verb: "get", Resource: "secrets", Namespace: "team-a"},
		{Verb: "create", Resource: "secrets", Namespace: "team-a"},
		{Verb: "update", Resource: "secrets", Namespace: "team-a", Name: "sops-age"}}, TargetReadAccess(target),
		"the operator writes an identity into that Secret, creating it if need be")
	assert.Equal(t, "list deployments.apps in every namespace", ReadAccess{Verb: "list", Group: "apps", Resource: "deployments"}.String())
}

func TestProviderReadAccess(t *testing.T) {
	p := &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "git"}}
	assert.Empty(t, ProviderReadAccess(p), "a provider without credentials sends none")
	p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "flux-git"}
	assert.Equal(t, []ReadAccess{{Verb: "get", Resource: "secrets", Namespace: "team-a", Name: "flux-git"}}, ProviderReadAccess(p),
		"the operator sends that Secret's credentials to the URL the provider's author chose")
	assert.Equal(t, "get secrets/flux-git in namespace team-a", ProviderReadAccess(p)[0].String())
}

func TestSelectorsProblem(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "in", Values: []string{"a"}}}}
	good := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	rule := func(sel *metav1.LabelSelector) v1alpha1.ResourceRule {
		return v1alpha1.ResourceRule{Resources: []string{"configmaps"}, ObjectSelector: sel}
	}
	cases := []struct {
		name       string
		rules      []v1alpha1.ResourceRule
		namespaces []*metav1.LabelSelector
		says       string
	}{
		{"accepts rules without selectors or with valid ones", []v1alpha1.ResourceRule{rule(nil), rule(good)}, []*metav1.LabelSelector{nil, good}, ""},
		{"names the rule whose objectSelector has an unknown operator", []v1alpha1.ResourceRule{rule(good), rule(bad)}, nil, "WatchRule a/r: spec.rules[1].objectSelector"},
		{"names the rule whose namespaceSelector has an unknown operator", []v1alpha1.ResourceRule{rule(nil)}, []*metav1.LabelSelector{bad}, "spec.rules[0].namespaceSelector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := SelectorsProblem("WatchRule a/r", tc.rules, tc.namespaces)
			if tc.says == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), "operators are In, NotIn, Exists and DoesNotExist", "says what to fix")
		})
	}
}

func TestSensitiveRouteWarning(t *testing.T) {
	target := func(enc *v1alpha1.Encryption, conds ...metav1.Condition) *v1alpha1.GitTarget {
		return &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "live", Generation: 2},
			Spec: v1alpha1.GitTargetSpec{Encryption: enc}, Status: v1alpha1.GitTargetStatus{Conditions: conds}}
	}
	age := &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{Recipients: []string{"age1x"}},
		SensitiveResources: []v1alpha1.GroupResource{{Group: "bitnami.com", Resource: "sealedsecrets"}}}
	ready := metav1.Condition{Type: v1alpha1.ConditionEncryptionReady, Status: metav1.ConditionTrue, ObservedGeneration: 2}
	stale := ready
	stale.ObservedGeneration = 1
	failed := metav1.Condition{Type: v1alpha1.ConditionEncryptionReady, Status: metav1.ConditionFalse, ObservedGeneration: 2, Message: "no age recipients"}
	staleFailure := failed
	staleFailure.ObservedGeneration = 1
	rule := func(groups []string, resources ...string) []v1alpha1.ResourceRule {
		return []v1alpha1.ResourceRule{{APIGroups: groups, Resources: resources}}
	}
	vault := []schema.GroupResource{{Group: "vault.example.com", Resource: "tokens"}}
	for _, tc := range []struct {
		name   string
		rules  []v1alpha1.ResourceRule
		target *v1alpha1.GitTarget
		want   []string
	}{
		{"warns of Secrets routed to a target without encryption", rule([]string{""}, "configmaps", "secrets"), target(nil),
			[]string{"WatchRule team-a/r routes secrets to GitTarget team-a/live, which cannot encrypt (it has no spec.encryption)"}},
		{"says why a target's encryption failed", rule([]string{""}, "secrets"), target(age, failed), []string{"EncryptionReady is False: no age recipients"}},
		{"says a changed target's encryption is not checked yet", rule([]string{""}, "secrets"), target(age, stale), []string{"whose encryption has not been checked for its current spec yet"}},
		{"does not quote a failure of an older spec as the target's", rule([]string{""}, "secrets"), target(age, staleFailure), []string{"whose encryption has not been checked for its current spec yet"}},
		{"takes a target's own sensitive resource named under every group", rule([]string{"*"}, "sealedsecrets"), target(age, failed), []string{"routes sealedsecrets.bitnami.com to"}},
		{"names the resources the operator treats as sensitive", rule([]string{"vault.example.com"}, "tokens"), target(nil),
			[]string{"routes tokens.vault.example.com to"}},
		{"takes secrets named under every group", rule([]string{"*"}, "secrets"), target(nil), []string{"routes secrets to"}},
		{"takes the operator's sensitive resource named under every group", rule([]string{"*"}, "tokens"), target(nil), []string{"routes tokens.vault.example.com to"}},
		{"does not take a sensitive resource's name under another group", rule([]string{"example.com"}, "tokens", "secrets"), target(nil), nil},
		{"is quiet for a target that can encrypt", rule([]string{""}, "secrets"), target(age, ready), nil},
		{"is quiet for a rule naming nothing sensitive", rule([]string{""}, "configmaps"), target(nil), nil},
		{"does not guess what a wildcard takes", rule([]string{""}, "*"), target(nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SensitiveRouteWarning("WatchRule team-a/r", tc.rules, tc.target, vault)
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
	t.Run("names a target's own sensitive resources, and only its own", func(t *testing.T) {
		got := SensitiveRouteWarning("WatchRule team-a/r", rule([]string{"bitnami.com"}, "sealedsecrets"), target(age, failed), nil)
		assert.Contains(t, got, "routes sealedsecrets.bitnami.com to")
		assert.Empty(t, SensitiveRouteWarning("WatchRule team-a/r", rule([]string{"bitnami.com"}, "sealedsecrets"), target(nil), nil))
	})
}

func TestRouteAccess(t *testing.T) {
	need := RouteAccess(v1alpha1.NamespacedObjectReference{Namespace: "team-a", Name: "live"})
	assert.Equal(t, []ReadAccess{{Verb: "update", Group: "reverser.gitops.dev", Resource: "gittargets", Namespace: "team-a", Name: "live"}}, need,
		"a ClusterWatchRule's author must be allowed to change the GitTarget it writes through")
	assert.Equal(t, "update gittargets.reverser.gitops.dev/live in namespace team-a", need[0].String())
}

func TestRoutedReadAccess(t *testing.T) {
	target := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "backup"}}
	clusterRule := func(name, ns, targetName string, groups, resources []string) v1alpha1.ClusterWatchRule {
		return v1alpha1.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterWatchRuleSpec{
			TargetRef: v1alpha1.NamespacedObjectReference{Namespace: ns, Name: targetName},
			Rules: []v1alpha1.ClusterResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIGroups: groups, Resources: resources},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}}}}
	}
	watchRule := func(name, ns, targetName string, groups, resources []string) v1alpha1.WatchRule {
		return v1alpha1.WatchRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.WatchRuleSpec{
			TargetRef: v1alpha1.LocalObjectReference{Name: targetName},
			Rules:     []v1alpha1.ResourceRule{{APIGroups: groups, Resources: resources}}}}
	}
	secrets := ReadAccess{Verb: "get", Resource: "secrets"}
	tokens := ReadAccess{Verb: "get", Group: "example.com", Resource: "tokens"}
	localTokens := ReadAccess{Verb: "get", Group: "example.com", Resource: "tokens", Namespace: "platform"}
	grs := []schema.GroupResource{{Resource: "secrets"}, {Group: "example.com", Resource: "tokens"}}
	tests := []struct {
		name    string
		cluster []v1alpha1.ClusterWatchRule
		local   []v1alpha1.WatchRule
		want    []RoutedAccess
	}{
		{name: "asks to read Secrets in every namespace when a ClusterWatchRule routes them into the target",
			cluster: []v1alpha1.ClusterWatchRule{clusterRule("all", "platform", "backup", []string{""}, []string{"configmaps", "secrets"})},
			want:    []RoutedAccess{{secrets, []string{"ClusterWatchRule all"}}}},
		{name: "counts a wildcard as every sensitive resource it matches",
			cluster: []v1alpha1.ClusterWatchRule{clusterRule("all", "platform", "backup", []string{"*"}, []string{"*"})},
			want:    []RoutedAccess{{secrets, []string{"ClusterWatchRule all"}}, {tokens, []string{"ClusterWatchRule all"}}}},
		{name: "asks nothing for rules into other targets or without sensitive resources",
			cluster: []v1alpha1.ClusterWatchRule{
				clusterRule("other", "platform", "live", []string{""}, []string{"secrets"}),
				clusterRule("elsewhere", "team-b", "backup", []string{""}, []string{"secrets"}),
				clusterRule("plain", "platform", "backup", []string{""}, []string{"configmaps"}),
				clusterRule("group", "platform", "backup", []string{"apps"}, []string{"*"}),
			},
			local: []v1alpha1.WatchRule{watchRule("other", "platform", "live", []string{"example.com"}, []string{"tokens"})}},
		{name: "asks once for a resource routed by two rules, naming both",
			cluster: []v1alpha1.ClusterWatchRule{
				clusterRule("one", "platform", "backup", []string{""}, []string{"secrets"}),
				clusterRule("two", "platform", "backup", []string{"", "example.com"}, []string{"secrets", "tokens"}),
			},
			want: []RoutedAccess{{secrets, []string{"ClusterWatchRule one", "ClusterWatchRule two"}}, {tokens, []string{"ClusterWatchRule two"}}}},
		{name: "asks to read what a WatchRule of the target's namespace routes, there",
			local: []v1alpha1.WatchRule{watchRule("tokens", "platform", "backup", []string{"example.com"}, []string{"tokens"})},
			want:  []RoutedAccess{{localTokens, []string{"WatchRule platform/tokens"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RoutedReadAccess(target, grs, tt.cluster, tt.local))
		})
	}
	assert.Equal(t, "get secrets in every namespace", secrets.String())
}

func TestRoutedSensitive(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	tokens := schema.GroupResource{Group: "example.com", Resource: "tokens"}
	keys := schema.GroupResource{Group: "example.com", Resource: "keys"}
	global := []schema.GroupResource{tokens}
	target := func(recipient string, own ...schema.GroupResource) *v1alpha1.GitTarget {
		tg := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "backup"}}
		if recipient == "" {
			return tg
		}
		tg.Spec.Encryption = &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{Recipients: []string{recipient}}}
		for _, gr := range own {
			tg.Spec.Encryption.SensitiveResources = append(tg.Spec.Encryption.SensitiveResources, v1alpha1.GroupResource{Group: gr.Group, Resource: gr.Resource})
		}
		return tg
	}
	withRecipients := func(tg *v1alpha1.GitTarget, recipients ...string) *v1alpha1.GitTarget {
		tg.Spec.Encryption.Age.Recipients = recipients
		return tg
	}
	withSecret := func(tg *v1alpha1.GitTarget, name string) *v1alpha1.GitTarget {
		tg.Spec.Encryption.Age.SecretRef = &v1alpha1.LocalObjectReference{Name: name}
		return tg
	}
	tests := []struct {
		name     string
		now, old *v1alpha1.GitTarget
		want     []schema.GroupResource
	}{
		{"asks for everything it encrypts when a target is created with recipients", target("age1a", keys), nil, []schema.GroupResource{secrets, tokens, keys}},
		{"asks for everything it encrypts when a recipient is added", target("age1b"), target("age1a"), []schema.GroupResource{secrets, tokens}},
		{"asks nothing when a recipient is removed, as after a leak", withRecipients(target("age1a"), "age1a"), withRecipients(target("age1a"), "age1a", "age1leaked"), nil},
		{"asks for everything it encrypts when it names a Secret of identities", withSecret(target("age1a"), "keys"), target("age1a"), []schema.GroupResource{secrets, tokens}},
		{"asks nothing when the recipients stay and nothing is dropped", target("age1a", keys), target("age1a"), nil},
		{"asks for a resource it stops encrypting, which it would write in plaintext", target("age1a"), target("age1a", keys), []schema.GroupResource{keys}},
		{"asks for its own sensitive resources when encryption is removed, not for Secrets, which it then refuses", target(""), target("age1a", keys), []schema.GroupResource{keys}},
		{"asks nothing of a target without encryption", target(""), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RoutedSensitive(tt.now, tt.old, global))
		})
	}
}
