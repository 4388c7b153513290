package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
		c, err := claimsFor(target, "team-a", rule, nil, d, false)
		require.NoError(t, err)
		assert.Empty(t, c.stalled, "no problem for a human")
		assert.Empty(t, c.waiting, "a kept resource waits for nothing")
		return c.claims
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
		c, err := claimsFor(target, "team-a", v1alpha1.ResourceRule{APIGroups: []string{"metrics.example.com"}, Resources: []string{"podmetrics"}}, nil, other, false)
		require.NoError(t, err)
		require.Len(t, c.claims, 1)
		assert.Equal(t, "v1", c.claims[0].Resource.GVR.Version)
	})
}

func TestARuleVerdictWhileAnAPIFailsDiscovery(t *testing.T) {
	rw := metav1.Verbs{"get", "list", "watch"}
	lists := []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: rw},
	}}}
	podMetrics := watcher.Resource{GVR: schema.GroupVersionResource{Group: "metrics.example.com", Version: "v1beta1", Resource: "podmetrics"},
		Kind: "PodMetrics", Namespaced: true}
	failed := map[schema.GroupVersion]error{podMetrics.GVR.GroupVersion(): errors.New("the server is currently unable to handle the request")}
	target := types.NamespacedName{Namespace: "team-a", Name: "live"}
	metrics := v1alpha1.ResourceRule{APIGroups: []string{"metrics.example.com"}, Resources: []string{"podmetrics"}}
	widgets := v1alpha1.ResourceRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	configMaps := v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"configmaps"}}
	cases := []struct {
		name       string
		registered []watcher.Resource // resources the rule watched before discovery failed
		rules      []v1alpha1.ResourceRule
		reason     string // of Ready (and of Stalled or Reconciling)
		stalled    bool
		resolved   metav1.ConditionStatus
		says       []string
	}{
		{"keeps watching a named resource of the failing API, resolved and Reconciling, not missing",
			[]watcher.Resource{podMetrics}, []v1alpha1.ResourceRule{metrics, configMaps},
			v1alpha1.ReasonDiscoveryFailed, false, metav1.ConditionTrue,
			[]string{"discovery of metrics.example.com/v1beta1 (the server is currently unable to handle the request) failed"}},
		{"waits, Reconciling, for a named resource of the failing API it never watched, instead of calling it missing",
			nil, []v1alpha1.ResourceRule{metrics, configMaps},
			v1alpha1.ReasonDiscoveryFailed, false, metav1.ConditionFalse,
			[]string{"podmetrics is not listed while discovery of metrics.example.com/v1beta1 (the server is currently unable to handle the request) fails"}},
		{"stays Stalled for a resource missing from groups that answered, naming the failing API too",
			[]watcher.Resource{podMetrics}, []v1alpha1.ResourceRule{metrics, widgets},
			v1alpha1.ReasonResourceNotFound, true, metav1.ConditionFalse,
			[]string{"widgets.example.com not found on the server", "discovery of metrics.example.com/v1beta1"}},
		{"stays Stalled for a missing resource while an API it does not name fails discovery",
			nil, []v1alpha1.ResourceRule{widgets},
			v1alpha1.ReasonResourceNotFound, true, metav1.ConditionFalse,
			[]string{"widgets.example.com not found on the server"}},
		{"stays Stalled for a resource missing from every group of \"*\", whatever API fails elsewhere",
			nil, []v1alpha1.ResourceRule{{APIGroups: []string{"*"}, Resources: []string{"widgets"}}},
			v1alpha1.ReasonResourceNotFound, true, metav1.ConditionFalse,
			[]string{"widgets.* not found on the server"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var registered []watcher.Claim
			for _, r := range tc.registered {
				registered = append(registered, watcher.Claim{Target: target, Resource: r, Namespace: "team-a"})
			}
			d := discovered{lists: lists, failed: failed, undiscovered: undiscovered(registered, failed)}
			var all compiled
			for _, rule := range tc.rules {
				c, err := claimsFor(target, "team-a", rule, nil, d, false)
				require.NoError(t, err)
				all.add(c)
			}
			var st v1alpha1.WatchRuleStatus
			res := applyResult(&st, 1, all, keptMessage(all.claims, failed), listing{})

			assert.Equal(t, 30*time.Second, res.RequeueAfter, "looks again while anything is unresolved")
			ready := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, ready)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, tc.reason, ready.Reason)
			assert.Equal(t, tc.stalled, apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionStalled))
			assert.Equal(t, !tc.stalled, apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReconciling))
			assert.Equal(t, tc.resolved, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResourcesResolved).Status)
			for _, s := range tc.says {
				assert.Contains(t, ready.Message, s)
			}
		})
	}
}

func TestARuleWithAHundredMissingResourcesQuotesTenAndCountsTheRest(t *testing.T) {
	var c compiled
	for i := range 100 {
		c.stalled = append(c.stalled, fmt.Sprintf("widget%02ds.example.com not found on the server: install its CRD, or fix apiGroups %s", i, strings.Repeat("x", 300)))
	}
	var st v1alpha1.WatchRuleStatus
	applyResult(&st, 1, c, "", listing{})
	stalled := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled)
	require.NotNil(t, stalled)
	assert.Contains(t, stalled.Message, "widget09s")
	assert.NotContains(t, stalled.Message, "widget10s")
	assert.True(t, strings.HasSuffix(stalled.Message, "; and 90 more"))
	assert.Less(t, len(stalled.Message), v1alpha1.MaxMessage, "a message the API server takes")
}

func TestWhatTheListsOfARulesResourcesSayReachesItsStatus(t *testing.T) {
	resolved := compiled{claims: []watcher.Claim{{Resource: watcher.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}}}}}
	t.Run("a resource that cannot be listed makes the rule Reconciling, quoting why", func(t *testing.T) {
		var st v1alpha1.WatchRuleStatus
		res := applyResult(&st, 1, resolved, "", listing{problems: []string{"widgets.example.com cannot be listed: conversion webhook failed"}})
		ready := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		require.NotNil(t, ready)
		assert.Equal(t, metav1.ConditionFalse, ready.Status)
		assert.Equal(t, v1alpha1.ReasonListFailed, ready.Reason)
		assert.Contains(t, ready.Message, "widgets.example.com cannot be listed: conversion webhook failed: nothing of it is captured")
		assert.True(t, apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionResourcesResolved), "resolved, only not listed")
		assert.Equal(t, time.Minute, res.RequeueAfter)
	})
	t.Run("a resource still listing leaves the rule Ready and looks again soon", func(t *testing.T) {
		var st v1alpha1.WatchRuleStatus
		res := applyResult(&st, 1, resolved, "", listing{pending: true})
		assert.True(t, apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady))
		assert.Equal(t, 15*time.Second, res.RequeueAfter, "should its first list fail, the rule says so")
	})
	t.Run("a rule whose resources listed does not look again", func(t *testing.T) {
		var st v1alpha1.WatchRuleStatus
		assert.Zero(t, applyResult(&st, 1, resolved, "", listing{}).RequeueAfter)
	})
}
