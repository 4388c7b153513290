package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/watcher"
	"github.com/gitops-reverser/gitops-reverser/watcher/controller"
)

// nonName matches what a namespace name cannot hold.
var nonName = regexp.MustCompile(`[^a-z0-9]+`)

func namespace(t *testing.T) string {
	t.Helper()
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 60 {
		name = strings.Trim(name[:60], "-")
	}
	require.NoError(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

func gitTarget(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, k8s.Create(context.Background(), &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"},
		Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: "main", Path: "live"}}))
}

func waitCondition(t *testing.T, obj client.Object, conds func() []metav1.Condition, typ string, status metav1.ConditionStatus) string {
	t.Helper()
	var last []metav1.Condition
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
		last = conds()
		if c := apimeta.FindStatusCondition(last, typ); c != nil && c.Status == status {
			return c.Message
		}
	}
	t.Fatalf("condition %s=%s not reached; conditions: %+v", typ, status, last)
	return ""
}

func rule(ns string, groups, resources []string) *v1alpha1.WatchRule {
	return &v1alpha1.WatchRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rule"},
		Spec: v1alpha1.WatchRuleSpec{TargetRef: v1alpha1.LocalObjectReference{Name: "live"},
			Rules: []v1alpha1.ResourceRule{{APIGroups: groups, Resources: resources}}}}
}

func TestWatchRule(t *testing.T) {
	ctx := context.Background()
	t.Run("resolves configmaps and registers a claim limited to its namespace", func(t *testing.T) {
		ns := namespace(t)
		gitTarget(t, ns)
		wr := rule(ns, []string{""}, []string{"configmaps"})
		require.NoError(t, k8s.Create(ctx, wr))
		waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		assert.Equal(t, []string{"v1/configmaps"}, wr.Status.Resources)
		claims := registry.claims("WatchRule/" + ns + "/rule")
		require.Len(t, claims, 1)
		assert.Equal(t, ns, claims[0].Namespace)
		assert.True(t, claims[0].Create && claims[0].Update && claims[0].Delete, "operations default to all")
	})
	t.Run("is Stalled naming an unknown resource, then picks up its CRD once installed", func(t *testing.T) {
		ns := namespace(t)
		gitTarget(t, ns)
		wr := rule(ns, []string{"example.com"}, []string{"widgets"})
		require.NoError(t, k8s.Create(ctx, wr))
		msg := waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, "widgets.example.com not found")

		require.NoError(t, k8s.Create(ctx, widgetCRD()))
		waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		assert.Equal(t, []string{"example.com/v1/widgets"}, wr.Status.Resources)
	})
	t.Run("refuses a cluster-scoped resource, pointing at ClusterWatchRule", func(t *testing.T) {
		ns := namespace(t)
		gitTarget(t, ns)
		wr := rule(ns, []string{"rbac.authorization.k8s.io"}, []string{"clusterroles"})
		require.NoError(t, k8s.Create(ctx, wr))
		msg := waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, "use a ClusterWatchRule")
	})
	t.Run("is Stalled while its GitTarget does not exist", func(t *testing.T) {
		ns := namespace(t)
		wr := rule(ns, []string{""}, []string{"configmaps"})
		require.NoError(t, k8s.Create(ctx, wr))
		msg := waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, "GitTarget "+ns+"/live not found")
		gitTarget(t, ns)
		waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)

		require.NoError(t, k8s.Delete(ctx, &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"}}))
		waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Empty(t, wr.Status.Resources, "it watches nothing until the target exists again")
		resolved := apimeta.FindStatusCondition(wr.Status.Conditions, v1alpha1.ConditionResourcesResolved)
		require.NotNil(t, resolved)
		assert.Equal(t, metav1.ConditionFalse, resolved.Status)
	})
	t.Run("watches nothing for a GitTarget being deleted", func(t *testing.T) {
		ns := namespace(t)
		gitTarget(t, ns)
		wr := rule(ns, []string{""}, []string{"configmaps"})
		require.NoError(t, k8s.Create(ctx, wr))
		waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)

		// A foreground deletion keeps the target until its dependents are gone; envtest has
		// no garbage collector, so a finalizer of the test's own keeps it instead.
		gt := &v1alpha1.GitTarget{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "live"}, gt))
		gt.Finalizers = []string{"test.example.com/keep"}
		require.NoError(t, k8s.Update(ctx, gt))
		require.NoError(t, k8s.Delete(ctx, gt))
		msg := waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, "GitTarget "+ns+"/live is being deleted")
		assert.Empty(t, registry.claims("WatchRule/"+ns+"/rule"), "its writer has stopped: nothing is submitted for it")

		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(gt), gt))
		gt.Finalizers = nil
		require.NoError(t, k8s.Update(ctx, gt))
	})
}

func TestClusterWatchRule(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	gitTarget(t, ns)
	t.Run("requires a namespaceSelector for namespaced resources", func(t *testing.T) {
		cr := &v1alpha1.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: "no-selector"},
			Spec: v1alpha1.ClusterWatchRuleSpec{TargetRef: v1alpha1.NamespacedObjectReference{Namespace: ns, Name: "live"},
				Rules: []v1alpha1.ClusterResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"configmaps"}}}}}}
		require.NoError(t, k8s.Create(ctx, cr))
		msg := waitCondition(t, cr, func() []metav1.Condition { return cr.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, "set namespaceSelector")
	})
	t.Run("registers cluster-scoped claims", func(t *testing.T) {
		cr := &v1alpha1.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: "roles"},
			Spec: v1alpha1.ClusterWatchRuleSpec{TargetRef: v1alpha1.NamespacedObjectReference{Namespace: ns, Name: "live"},
				Rules: []v1alpha1.ClusterResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}}}}}}
		require.NoError(t, k8s.Create(ctx, cr))
		waitCondition(t, cr, func() []metav1.Condition { return cr.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		claims := registry.claims("ClusterWatchRule/roles")
		require.Len(t, claims, 1)
		assert.False(t, claims[0].Resource.Namespaced)
	})
}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

// TestARuleKeepsItsResourcesWhileTheirAPICannotBeDiscovered registers an aggregated API
// whose service does not exist, so the API server reports its group-version as failing
// discovery, as it would for a metrics server that is restarting. The rule registered
// claims for that API when it was up (seeded in the recording registry): they stay.
func TestARuleKeepsItsResourcesWhileTheirAPICannotBeDiscovered(t *testing.T) {
	ctx := context.Background()
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.example.com"},
		"spec": map[string]any{"group": "metrics.example.com", "version": "v1beta1", "insecureSkipTLSVerify": true,
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service": map[string]any{"namespace": "default", "name": "no-such-service", "port": int64(443)}},
	}}
	require.NoError(t, k8s.Create(ctx, apiService))
	t.Cleanup(func() { _ = k8s.Delete(ctx, apiService) })

	ns := namespace(t)
	gitTarget(t, ns)
	registered := []watcher.Claim{{Target: types.NamespacedName{Namespace: ns, Name: "live"}, Namespace: ns,
		Resource: watcher.Resource{GVR: schema.GroupVersionResource{Group: "metrics.example.com", Version: "v1beta1", Resource: "podmetrics"},
			Kind: "PodMetrics", Namespaced: true}, ObjectSelector: labels.Everything(), Create: true, Update: true}}
	key := watcher.RuleKey("WatchRule", ns, "rule")
	registry.SetRule(key, registered)
	// Until the aggregator has tried the missing service, the group-version is merely absent
	// from discovery, not failing: the rule would go Stalled instead. The reconcilers read
	// discovery through their cache, which sees an APIService's change within
	// discoveryMaxAge (10 s).
	require.Eventually(t, func() bool {
		_, failed, err := shared.Preferred()
		return err == nil && failed[schema.GroupVersion{Group: "metrics.example.com", Version: "v1beta1"}] != nil
	}, 60*time.Second, 200*time.Millisecond, "discovery reports metrics.example.com/v1beta1 as failing")

	wr := rule(ns, []string{"metrics.example.com"}, []string{"podmetrics"})
	require.NoError(t, k8s.Create(ctx, wr))
	msg := waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionReconciling, metav1.ConditionTrue)
	assert.Contains(t, msg, "metrics.example.com/v1beta1")
	assert.Equal(t, v1alpha1.ReasonDiscoveryFailed, apimeta.FindStatusCondition(wr.Status.Conditions, v1alpha1.ConditionReconciling).Reason)
	got := registry.claims(key)
	require.Len(t, got, 1, "the informer keeps running: changes waiting for it are not dropped")
	assert.Equal(t, registered[0].Resource, got[0].Resource)
	assert.True(t, got[0].Delete, "compiled from the rule as it is now (all operations), not as registered")
	resolved := apimeta.FindStatusCondition(wr.Status.Conditions, v1alpha1.ConditionResourcesResolved)
	assert.Equal(t, metav1.ConditionTrue, resolved.Status, "a kept resource is not reported missing: %s", resolved.Message)

	// A rule that never watched the API (as after a restart while it is down) waits for it
	// rather than calling its resource missing.
	fresh := rule(ns, []string{"metrics.example.com"}, []string{"podmetrics"})
	fresh.Name = "fresh"
	require.NoError(t, k8s.Create(ctx, fresh))
	msg = waitCondition(t, fresh, func() []metav1.Condition { return fresh.Status.Conditions }, v1alpha1.ConditionReconciling, metav1.ConditionTrue)
	assert.Contains(t, msg, "podmetrics is not listed while discovery of metrics.example.com/v1beta1")
	assert.Nil(t, apimeta.FindStatusCondition(fresh.Status.Conditions, v1alpha1.ConditionStalled), "nothing for a human to fix in the rule")
	assert.Equal(t, v1alpha1.ReasonDiscoveryFailed, apimeta.FindStatusCondition(fresh.Status.Conditions, v1alpha1.ConditionResourcesResolved).Reason)
	assert.False(t, registry.loaded(watcher.RuleKey("WatchRule", ns, "fresh")), "registered as waiting: its targets' lists prune nothing meanwhile")
	assert.True(t, registry.loaded(key), "a rule that keeps its resources is loaded")

	// A rule taking every resource of the group finds nothing missing to wait for: it waits
	// for the group itself, rather than be Ready watching none of it.
	every := rule(ns, []string{"metrics.example.com"}, []string{"*"})
	every.Name = "every"
	require.NoError(t, k8s.Create(ctx, every))
	msg = waitCondition(t, every, func() []metav1.Condition { return every.Status.Conditions }, v1alpha1.ConditionReconciling, metav1.ConditionTrue)
	assert.Contains(t, msg, "the resources of metrics.example.com/v1beta1 are not listed while its discovery fails")
	assert.Equal(t, v1alpha1.ReasonDiscoveryFailed, apimeta.FindStatusCondition(every.Status.Conditions, v1alpha1.ConditionResourcesResolved).Reason)
	assert.False(t, registry.loaded(watcher.RuleKey("WatchRule", ns, "every")), "registered as waiting: its targets' lists prune nothing meanwhile")
}

func TestARuleWhoseDiscoveryFailsBeforeItWatchesIsNotReady(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	gitTarget(t, ns)
	wr := rule(ns, []string{""}, []string{"configmaps"})
	require.NoError(t, k8s.Create(ctx, wr))
	waitCondition(t, wr, func() []metav1.Condition { return wr.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)

	// Discovery fails outright: nothing answers at that address. The process that registered
	// the rule keeps watching through the error, and its Ready stands.
	down := controller.NewDiscovery(discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: "https://127.0.0.1:1"}))
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wr)}
	_, err := (&controller.WatchRuleReconciler{Client: k8s, Discovery: down, Registry: registry}).Reconcile(ctx, req)
	require.Error(t, err)
	require.NoError(t, k8s.Get(ctx, req.NamespacedName, wr))
	assert.Equal(t, metav1.ConditionTrue, apimeta.FindStatusCondition(wr.Status.Conditions, v1alpha1.ConditionReady).Status)

	// A new process, which has registered nothing: the Ready an earlier process left would
	// claim watches that nothing runs now. The suite's own controllers reconcile the rule
	// again at that verdict change and write theirs over it: the status is read as the
	// reconcile wrote it.
	fresh := &recordingRegistry{rules: map[string][]watcher.Claim{}, waiting: map[string]bool{}}
	seen := &statusSeen{Client: k8s}
	_, err = (&controller.WatchRuleReconciler{Client: seen, Discovery: down, Registry: fresh}).Reconcile(ctx, req)
	require.Error(t, err)
	require.NotNil(t, seen.last, "the status was written")
	wr = seen.last.(*v1alpha1.WatchRule)
	ready := apimeta.FindStatusCondition(wr.Status.Conditions, v1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.ReasonRetrying, ready.Reason)
	assert.Contains(t, ready.Message, "not watching yet")
	assert.Empty(t, wr.Status.Resources)
	resolved := apimeta.FindStatusCondition(wr.Status.Conditions, v1alpha1.ConditionResourcesResolved)
	assert.Equal(t, metav1.ConditionFalse, resolved.Status, "the earlier process's resolution stands for nothing now")
	assert.Equal(t, v1alpha1.ReasonRetrying, resolved.Reason)
}

// statusSeen passes every call to the API server, and keeps a copy of the last object whose
// status it wrote: the status as the reconciler wrote it.
type statusSeen struct {
	client.Client
	last client.Object
}

func (s *statusSeen) Status() client.SubResourceWriter {
	return &statusWriter{SubResourceWriter: s.Client.Status(), seen: s}
}

type statusWriter struct {
	client.SubResourceWriter
	seen *statusSeen
}

func (w *statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.seen.last = obj.DeepCopyObject().(client.Object)
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

func TestRuleResourcesValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := []struct{ name, resource string }{
		{"refuses a kind where the plural resource name belongs, saying where to find it", "Deployment"},
		{"refuses a subresource, saying it is not watched", "deployments/scale"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wr := rule(ns, []string{"apps"}, []string{tc.resource})
			wr.Name = fmt.Sprintf("bad-%d", i)
			err := k8s.Create(ctx, wr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "the NAME column of kubectl api-resources")
			assert.NotContains(t, err.Error(), "should match", "the API server's bare-regex message stays hidden")

			cr := &v1alpha1.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-bad-%d", ns, i)},
				Spec: v1alpha1.ClusterWatchRuleSpec{TargetRef: v1alpha1.NamespacedObjectReference{Namespace: ns, Name: "live"},
					Rules: []v1alpha1.ClusterResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIGroups: []string{"apps"}, Resources: []string{tc.resource}}}}}}
			err = k8s.Create(ctx, cr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "subresources such as deployments/scale are not watched")
		})
	}
	t.Run("accepts plural names, dotted names and *", func(t *testing.T) {
		wr := rule(ns, []string{"apps"}, []string{"deployments", "widgets.v1.example.com", "*"})
		require.NoError(t, k8s.Create(ctx, wr))
	})
}

// discoveryReads counts the discovery requests (of /api and /apis) made through the config it
// wraps; it only observes, the API server answers as usual.
type discoveryReads struct {
	rt    http.RoundTripper
	reads atomic.Int32
}

func (d *discoveryReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/api" || req.URL.Path == "/apis" {
		d.reads.Add(1)
	}
	return d.rt.RoundTrip(req)
}

func TestOneDiscoveryServesEveryRuleReconciledMeanwhile(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	gitTarget(t, ns)
	counted := &discoveryReads{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counted.rt = rt; return counted }
	shared := controller.NewDiscovery(discovery.NewDiscoveryClientForConfigOrDie(cfg))
	// The reconciler under test registers into a registry of its own: the suite's
	// controllers reconcile the same rules.
	own := &recordingRegistry{rules: map[string][]watcher.Claim{}, waiting: map[string]bool{}}
	r := &controller.WatchRuleReconciler{Client: k8s, Discovery: shared, Registry: own}
	reconcileAll := func() {
		for i := range 5 {
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("rule-%d", i)}}
			_, err := r.Reconcile(ctx, req)
			require.NoError(t, err)
		}
	}
	for i := range 5 {
		wr := rule(ns, []string{""}, []string{"configmaps"})
		wr.Name = fmt.Sprintf("rule-%d", i)
		require.NoError(t, k8s.Create(ctx, wr))
	}

	reconcileAll()
	reconcileAll()
	// One read of aggregated discovery is two requests, /api and /apis (under
	// discoveryMaxAge, 10 s: the reconciles take well under a second).
	assert.Equal(t, int32(2), counted.reads.Load(), "ten reconciles of five rules read discovery once")

	// A registered resource the cached answer does not list (an API briefly missing from
	// discovery) is read afresh before the rule drops it.
	key := watcher.RuleKey("WatchRule", ns, "rule-0")
	own.SetRule(key, append(own.claims(key), watcher.Claim{Resource: watcher.Resource{
		GVR: schema.GroupVersionResource{Group: "gone.example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}}))
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "rule-0"}})
	require.NoError(t, err)
	assert.Equal(t, int32(4), counted.reads.Load(), "one fresh read confirms the drop")
}
