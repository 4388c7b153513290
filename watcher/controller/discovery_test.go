package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/watcher"
)

func TestARuleCompiledWhileAnAPIFailsDiscovery(t *testing.T) {
	rw := metav1.Verbs{"get", "list", "watch"}
	lists := []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: rw},
		{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: rw},
	}}}
	podMetrics := watcher.Resource{GVR: schema.GroupVersionResource{Group: "metrics.example.com", Version: "v1beta1", Resource: "podmetrics"},
		Kind: "PodMetrics", Namespaced: true}
	nodeMetrics := watcher.Resource{GVR: schema.GroupVersionResource{Group: "metrics.example.com", Version: "v1beta1", Resource: "nodemetrics"},
		Kind: "NodeMetrics"}
	failed := map[schema.GroupVersion]error{podMetrics.GVR.GroupVersion(): errors.New("the server is currently unable to handle the request")}
	d := discovered{lists: lists, failed: failed, undiscovered: []watcher.Resource{podMetrics, nodeMetrics}}
	target := types.NamespacedName{Namespace: "team-a", Name: "live"}
	resources := func(cs []watcher.Claim) []string {
		out := []string{}
		for _, c := range cs {
			out = append(out, c.Resource.GVR.Resource)
		}
		return out
	}
	compile := func(t *testing.T, rule v1alpha1.ResourceRule) []watcher.Claim {
		t.Helper()
		claims, _, err := claimsFor(target, "team-a", rule, nil, d, false)
		require.NoError(t, err)
		return claims
	}

	t.Run("keeps an undiscovered resource the rule names, and compiles the rest as usual", func(t *testing.T) {
		claims := compile(t, v1alpha1.ResourceRule{APIGroups: []string{"*"}, Resources: []string{"*"}})
		assert.Equal(t, []string{"configmaps", "secrets", "podmetrics"}, resources(claims), "nodemetrics is cluster-scoped: out of a WatchRule's scope")
		assert.Contains(t, keptMessage(claims, failed), "metrics.example.com/v1beta1 (the server is currently unable to handle the request)")
	})
	t.Run("gives the kept resource the rule's current target and operations", func(t *testing.T) {
		claims := compile(t, v1alpha1.ResourceRule{APIGroups: []string{"metrics.example.com"}, Resources: []string{"podmetrics"}, Operations: []v1alpha1.Operation{"CREATE"}})
		require.Equal(t, []string{"podmetrics"}, resources(claims))
		assert.Equal(t, target, claims[0].Target)
		assert.Equal(t, "team-a", claims[0].Namespace)
		assert.True(t, claims[0].Create)
		assert.False(t, claims[0].Delete, "an edit dropping DELETE applies to it too")
	})
	t.Run("drops an undiscovered resource the edited rule no longer names", func(t *testing.T) {
		claims := compile(t, v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"configmaps"}})
		assert.Equal(t, []string{"configmaps"}, resources(claims))
		assert.Empty(t, keptMessage(claims, failed))
	})
	t.Run("keeps nothing when another version of the resource was discovered", func(t *testing.T) {
		other := discovered{lists: append(lists, &metav1.APIResourceList{GroupVersion: "metrics.example.com/v1", APIResources: []metav1.APIResource{
			{Name: "podmetrics", Kind: "PodMetrics", Namespaced: true, Verbs: rw}}}), failed: failed, undiscovered: []watcher.Resource{podMetrics}}
		claims, _, err := claimsFor(target, "team-a", v1alpha1.ResourceRule{APIGroups: []string{"metrics.example.com"}, Resources: []string{"podmetrics"}}, nil, other, false)
		require.NoError(t, err)
		require.Len(t, claims, 1)
		assert.Equal(t, "v1", claims[0].Resource.GVR.Version)
	})
}
