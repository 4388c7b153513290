package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
