package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	assert.Equal(t, "list deployments.apps in every namespace", ReadAccess{Verb: "list", Group: "apps", Resource: "deployments"}.String())
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
