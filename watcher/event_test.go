package watcher

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/watcher/attribution"
)

// submissions records the changes the watcher hands the writer, one entry per Submit.
type submissions struct{ got [][]batch.Change }

func (s *submissions) Submit(cs ...batch.Change)                                   { s.got = append(s.got, cs) }
func (s *submissions) Snapshot(batch.Snapshot)                                     {}
func (s *submissions) Watched(types.NamespacedName, []schema.GroupVersionResource) {}

// countedSubmissions is lockedSubmissions that also counts the calls, those handing over
// nothing too: each event a handler had.
type countedSubmissions struct {
	lockedSubmissions
	calls int
}

func (s *countedSubmissions) Submit(cs ...batch.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.got = append(s.got, cs...)
}

// seen is the number of calls, and the changes handed over.
func (s *countedSubmissions) seen() (int, []batch.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, slices.Clone(s.got)
}

// deployment is the Deployment team-a/api at resourceVersion rv with replicas and, when
// set, a status.
func deployment(rv string, replicas int64, ready int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "api", "namespace": "team-a", "uid": "u-1", "resourceVersion": rv},
		"spec":     map[string]any{"replicas": replicas},
	}}
	if ready > 0 {
		u.Object["status"] = map[string]any{"readyReplicas": ready}
	}
	return u
}

// mustKey is the join key of an update of old to obj.
func mustKey(t *testing.T, obj, old *unstructured.Unstructured) attribution.Key {
	t.Helper()
	k, ok := attribution.KeyForRequest(attribution.Update, obj, old)
	require.True(t, ok)
	return k
}

func TestAnUpdateThatChangesNothingForGit(t *testing.T) {
	deployments := Resource{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true}
	claim := Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: deployments, Namespace: "team-a",
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	setup := func(t *testing.T) (*Watcher, *submissions, *attribution.Book) {
		t.Helper()
		book := attribution.NewBook(0, 0)
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard(), Attribution: book})
		w.byGVR[deployments.GVR] = []Claim{claim}
		return w, sink, book
	}
	record := func(t *testing.T, book *attribution.Book, user string, obj, old *unstructured.Unstructured) {
		t.Helper()
		k, ok := attribution.KeyForRequest(attribution.Update, obj, old)
		require.True(t, ok)
		book.Record(k, attribution.Author{Username: user})
	}

	t.Run("leaves a user's pending change with its author when a controller writes status", func(t *testing.T) {
		w, sink, book := setup(t)
		reg := prometheus.NewRegistry()
		m, err := attribution.NewMetrics(reg, book)
		require.NoError(t, err)
		w.opts.AttributionMetrics = m
		record(t, book, "alice", deployment("5", 3, 0), deployment("5", 2, 0))
		w.onEvent(deployments.GVR, deployment("5", 2, 0), deployment("6", 3, 0), false) // alice scales
		families, err := reg.Gather()
		require.NoError(t, err)
		lagged := uint64(0)
		for _, f := range families {
			if f.GetName() == "gitops_reverser_watch_lag_seconds" {
				lagged = f.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		assert.Equal(t, uint64(1), lagged, "her update's lag is timed")
		w.onEvent(deployments.GVR, deployment("6", 3, 0), deployment("7", 3, 3), false) // the controller's status write
		require.Len(t, sink.got, 2)
		require.Len(t, sink.got[0], 1)
		assert.Equal(t, "alice", sink.got[0][0].Author)
		assert.Empty(t, sink.got[1], "nothing for Git: the object stays in alice's window")
	})
	t.Run("does not hand a pending change to the author of a write of the same content", func(t *testing.T) {
		w, sink, book := setup(t)
		record(t, book, "alice", deployment("5", 3, 0), deployment("5", 2, 0))
		record(t, book, "bob", deployment("6", 3, 0), deployment("6", 3, 0))
		w.onEvent(deployments.GVR, deployment("5", 2, 0), deployment("6", 3, 0), false) // alice scales
		w.onEvent(deployments.GVR, deployment("6", 3, 0), deployment("7", 3, 0), false) // bob applies the same
		require.Len(t, sink.got, 2)
		assert.Equal(t, "alice", sink.got[0][0].Author)
		assert.Empty(t, sink.got[1])
	})
	owned := func(u *unstructured.Unstructured, entries ...map[string]any) *unstructured.Unstructured {
		list := make([]any, len(entries))
		for i, e := range entries {
			list[i] = e
		}
		require.NoError(t, unstructured.SetNestedSlice(u.Object, list, "metadata", "managedFields"))
		return u
	}
	apply := func(fields map[string]any, at string) map[string]any {
		return map[string]any{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": at, "fieldsType": "FieldsV1", "fieldsV1": fields}
	}
	statusBy := func(at string) map[string]any {
		return map[string]any{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": at,
			"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:status": map[string]any{}}, "subresource": "status"}
	}
	replicas := map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}
	t.Run("hands on a write that only changes who owns a field, since the writer keeps owned fields", func(t *testing.T) {
		w, sink, _ := setup(t)
		w.onEvent(deployments.GVR, owned(deployment("6", 3, 0)), owned(deployment("7", 3, 0), apply(replicas, "t1")), false)
		require.Len(t, sink.got, 1)
		assert.Len(t, sink.got[0], 1, "a server-side apply pinning replicas at its value")
	})
	t.Run("still leaves out a status write that moves its own managedFields entry and the times", func(t *testing.T) {
		w, sink, _ := setup(t)
		w.onEvent(deployments.GVR, owned(deployment("6", 3, 0), apply(replicas, "t1"), statusBy("t1")),
			owned(deployment("7", 3, 3), apply(replicas, "t2"), statusBy("t2")), false)
		require.Len(t, sink.got, 1)
		assert.Empty(t, sink.got[0])
	})
	t.Run("leaves a user's pending change with its author when a cluster controller records its own work", func(t *testing.T) {
		w, sink, book := setup(t)
		alices := func(rv string, n int64) *unstructured.Unstructured {
			return owned(deployment(rv, n, 0), apply(replicas, "t1"))
		}
		bound := func(rv string) *unstructured.Unstructured {
			u := owned(deployment(rv, 3, 0), apply(replicas, "t1"), map[string]any{"manager": "kube-controller-manager", "operation": "Update",
				"apiVersion": "apps/v1", "time": "t2", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{"f:example.com/bound": map[string]any{}}}}})
			u.SetAnnotations(map[string]string{"example.com/bound": "yes"})
			return u
		}
		record(t, book, "alice", alices("5", 3), alices("5", 2))
		record(t, book, "system:serviceaccount:kube-system:some-controller", bound("6"), alices("6", 3))
		w.onEvent(deployments.GVR, alices("5", 2), alices("6", 3), false) // alice scales
		w.onEvent(deployments.GVR, alices("6", 3), bound("7"), false)     // the controller's note, which Git never gets
		require.Len(t, sink.got, 2)
		assert.Equal(t, "alice", sink.got[0][0].Author)
		assert.False(t, sink.got[0][0].Bookkeeping)
		require.Len(t, sink.got[1], 1, "handed on: Git's document may hold a field no one owns")
		assert.True(t, sink.got[1][0].Bookkeeping, "it leaves the object in alice's window")
		assert.Equal(t, "system:serviceaccount:kube-system:some-controller", sink.got[1][0].Author, "joined as any write")
		_, joined := book.JoinWithin(mustKey(t, bound("6"), alices("6", 3)), 0)
		assert.False(t, joined, "the controller's record is used up")
	})
	t.Run("hands on a change of content with its author", func(t *testing.T) {
		w, sink, book := setup(t)
		record(t, book, "bob", deployment("6", 4, 0), deployment("6", 3, 0))
		w.onEvent(deployments.GVR, deployment("6", 3, 0), deployment("7", 4, 0), false)
		require.Len(t, sink.got, 1)
		require.Len(t, sink.got[0], 1)
		assert.Equal(t, "bob", sink.got[0][0].Author)
	})
	t.Run("authors a write through the scale subresource by who made it, only for that change of replicas", func(t *testing.T) {
		w, sink, book := setup(t)
		book.Record(attribution.ScaleKey("u-1", "6", 5), attribution.Author{Username: "carol"}) // kubectl scale --replicas=5
		w.onEvent(deployments.GVR, deployment("6", 3, 0), deployment("7", 5, 0), false)
		require.Len(t, sink.got, 1)
		require.Len(t, sink.got[0], 1)
		assert.Equal(t, "carol", sink.got[0][0].Author)

		book.Record(attribution.ScaleKey("u-1", "7", 5), attribution.Author{Username: "carol"}) // lost the race to another write
		changed := deployment("8", 5, 0)
		changed.SetLabels(map[string]string{"tier": "web"})
		w.onEvent(deployments.GVR, deployment("7", 5, 0), changed, false)
		require.Len(t, sink.got, 2)
		require.Len(t, sink.got[1], 1)
		assert.Empty(t, sink.got[1][0].Author, "a change that is not a scale is not the scaler's")

		book.Record(attribution.ScaleKey("u-1", "8", 2), attribution.Author{Username: "carol"}) // refused by another webhook
		w.onEvent(deployments.GVR, deployment("8", 5, 0), deployment("9", 4, 0), false)         // someone unrecorded scales to 4
		require.Len(t, sink.got, 3)
		assert.Empty(t, sink.got[2][0].Author, "another count is another scale")

		book.Record(attribution.ScaleKey("u-1", "9", 6), attribution.Author{Username: "carol"})
		record(t, book, "dave", deployment("9", 6, 0), deployment("9", 4, 0))
		record(t, book, "erin", deployment("9", 6, 0), deployment("9", 4, 0)) // two records of one update: ambiguous
		w.onEvent(deployments.GVR, deployment("9", 4, 0), deployment("10", 6, 0), false)
		require.Len(t, sink.got, 4)
		assert.Empty(t, sink.got[3][0].Author, "an ambiguous update stays unattributed, not the scaler's")
	})
}

func TestADeleteInANamespaceSelectedByLabels(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	claim := Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: cms,
		NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything(), Delete: true}
	live := map[string]labels.Set{"shop": {"env": "prod"}, "dev": {"env": "dev"}}
	deleted := NewDeletedNamespaces(time.Minute)
	deleted.Remember("old-shop", labels.Set{"env": "prod"})
	deleted.Remember("old-dev", labels.Set{"env": "dev"})
	// As the binary wires it: the cache, then the labels of namespaces deleted lately.
	nsLabels := func(ns string) labels.Set {
		if l, ok := live[ns]; ok {
			return l
		}
		l, _ := deleted.Labels(ns)
		return l
	}
	deletes := func(ns string) int {
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: nsLabels})
		w.byGVR[cms.GVR] = []Claim{claim}
		w.onDelete(cms.GVR, cache.DeletedFinalStateUnknown{Key: ns + "/app", Obj: configMap(ns, "app", nil)})
		n := 0
		for _, cs := range sink.got {
			n += len(cs)
			for _, c := range cs {
				assert.True(t, c.Deleted, "a delete stays one whatever the object's later changes say")
			}
		}
		return n
	}
	assert.Equal(t, 1, deletes("shop"), "a selected namespace's delete is mirrored")
	assert.Equal(t, 0, deletes("dev"), "a namespace the selector leaves out is not")
	assert.Equal(t, 1, deletes("old-shop"), "a selected namespace deleted before its objects' deletes were handled still has them mirrored")
	assert.Equal(t, 0, deletes("old-dev"), "nor does a deleted namespace the selector left out reach the target")
}

func TestDeletedNamespacesAreRememberedForAWhile(t *testing.T) {
	now := time.Unix(1000, 0)
	d := NewDeletedNamespaces(10 * time.Minute)
	d.now = func() time.Time { return now }
	d.Remember("shop", labels.Set{"env": "prod"})
	got, ok := d.Labels("shop")
	assert.True(t, ok)
	assert.Equal(t, labels.Set{"env": "prod"}, got)
	_, ok = d.Labels("never-seen")
	assert.False(t, ok)
	now = now.Add(11 * time.Minute)
	_, ok = d.Labels("shop")
	assert.False(t, ok, "forgotten after the memory's time")
	d.Remember("blog", nil)
	assert.NotContains(t, d.labels, "shop", "expired entries are dropped, so the memory stays small")
	d.Forget("blog")
	_, ok = d.Labels("blog")
	assert.False(t, ok, "a namespace created again has its own labels")
}

func TestANamespaceWhoseLabelsChange(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	prod := labels.SelectorFromSet(labels.Set{"env": "prod"})
	claim := func(create, del bool) Claim {
		return Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: cms, NamespaceSelector: prod,
			ObjectSelector: labels.SelectorFromSet(labels.Set{"app": "shop"}), Create: create, Update: create, Delete: del}
	}
	listed := []*unstructured.Unstructured{
		configMap("shop", "app", map[string]string{"app": "shop"}),
		configMap("shop", "other-app", map[string]string{"app": "blog"}),
		configMap("elsewhere", "app", map[string]string{"app": "shop"}),
	}
	relabel := func(t *testing.T, c Claim, before, after labels.Set) []string {
		t.Helper()
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard()})
		w.byGVR[cms.GVR] = []Claim{c}
		w.informers[cms.GVR] = listedInformer(t, true, listed...)
		w.NamespaceRelabelled("shop", before, after)
		var got []string
		for _, cs := range sink.got {
			for _, ch := range cs {
				got = append(got, fmt.Sprintf("%s/%s deleted=%v listed=%v", ch.Key.Namespace, ch.Key.Name, ch.Deleted, ch.Relisted))
			}
		}
		return got
	}
	t.Run("hands over the selected objects of a namespace that joins, as listed: no author's change", func(t *testing.T) {
		assert.Equal(t, []string{"shop/app deleted=false listed=true"}, relabel(t, claim(true, true), labels.Set{"env": "dev"}, labels.Set{"env": "prod"}))
	})
	t.Run("hands over those of a namespace that leaves, for the rule that deletes, as removals", func(t *testing.T) {
		assert.Equal(t, []string{"shop/app deleted=true listed=false"}, relabel(t, claim(true, true), labels.Set{"env": "prod"}, nil),
			"journalled as a deletion seen")
	})
	t.Run("keeps the documents of a namespace that leaves a rule without DELETE", func(t *testing.T) {
		assert.Empty(t, relabel(t, claim(true, false), labels.Set{"env": "prod"}, nil))
	})
	t.Run("does nothing when the selector's answer stays the same", func(t *testing.T) {
		assert.Empty(t, relabel(t, claim(true, true), labels.Set{"env": "prod"}, labels.Set{"env": "prod", "team": "a"}))
	})
}

// lockedSubmissions is submissions for changes handed over from another goroutine.
type lockedSubmissions struct {
	mu  sync.Mutex
	got []batch.Change
}

func (s *lockedSubmissions) Submit(cs ...batch.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, cs...)
}
func (s *lockedSubmissions) Snapshot(batch.Snapshot)                                     {}
func (s *lockedSubmissions) Watched(types.NamespacedName, []schema.GroupVersionResource) {}

func (s *lockedSubmissions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// unsyncedProdRule is a watcher with a rule on the ConfigMaps of namespaces labelled
// env=prod, whose informer has not synced (a list that keeps failing) and lists shop/app.
func unsyncedProdRule(t *testing.T) (*Watcher, *lockedSubmissions, *informer) {
	t.Helper()
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	claim := Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: cms,
		NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	sink := &lockedSubmissions{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	inf := listedInformer(t, false, configMap("shop", "app", nil))
	w.byGVR[cms.GVR] = []Claim{claim}
	w.informers[cms.GVR] = inf
	return w, sink, inf
}

func TestANamespaceThatLeavesWhileItsInformerSyncs(t *testing.T) {
	w, sink, inf := unsyncedProdRule(t)

	w.NamespaceRelabelled("shop", labels.Set{"env": "prod"}, nil)
	assert.Zero(t, sink.count(), "nothing to list before the informer has synced")
	go inf.inf.Run(inf.ctx.Done())
	require.Eventually(t, func() bool { return sink.count() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the objects are handed over once it has: the snapshot that follows would not see a namespace that left")
}

// Relabelled again and again while its informer's list keeps failing, a namespace keeps one
// waiter, which hands the objects over from its labels before the first relabel to those
// after the last.
func TestANamespaceRelabelledOftenWhileItsInformerSyncsIsHandedOverOnce(t *testing.T) {
	w, sink, inf := unsyncedProdRule(t)

	for range 10 { // prod, staging, prod, ...: it ends where it began
		w.NamespaceRelabelled("shop", labels.Set{"env": "prod"}, labels.Set{"env": "staging"})
		w.NamespaceRelabelled("shop", labels.Set{"env": "staging"}, labels.Set{"env": "prod"})
	}
	w.NamespaceRelabelled("shop", labels.Set{"env": "prod"}, labels.Set{"env": "staging"}) // and leaves
	go inf.inf.Run(inf.ctx.Done())
	require.Eventually(t, func() bool { return sink.count() > 0 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // an absence has no signal: other waiters would have handed theirs over by now
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Len(t, sink.got, 1, "one hand-over, from prod to staging")
	assert.True(t, sink.got[0].Deleted, "the object left the target")
}

func TestAnObjectThatLeavesOneRuleOfATargetButNotAnother(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	byLabel := func(k, v string, update bool) Claim {
		return Claim{Target: target, Resource: cms, Namespace: "shop", ObjectSelector: labels.SelectorFromSet(labels.Set{k: v}),
			Create: true, Update: update, Delete: update}
	}
	relabelled := func(claims ...Claim) []batch.Change {
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard()})
		w.byGVR[cms.GVR] = claims
		before := configMap("shop", "x", map[string]string{"app": "web", "env": "prod"})
		before.SetResourceVersion("1")
		after := configMap("shop", "x", map[string]string{"env": "prod"})
		after.SetResourceVersion("2")
		w.onEvent(cms.GVR, before, after, false)
		require.Len(t, sink.got, 1)
		return sink.got[0]
	}
	t.Run("is the other rule's update, no removal, when its labels leave one rule's selector", func(t *testing.T) {
		got := relabelled(byLabel("app", "web", true), byLabel("env", "prod", true))
		require.Len(t, got, 1)
		assert.False(t, got[0].Deleted)
	})
	t.Run("is nothing at all when the rule that still selects it mirrors only creations", func(t *testing.T) {
		assert.Empty(t, relabelled(byLabel("app", "web", true), byLabel("env", "prod", false)),
			"neither a removal nor an update with the first rule's permission to delete")
	})
	t.Run("is nothing when its namespace leaves one rule's namespaceSelector and another rule selects it", func(t *testing.T) {
		sink := &submissions{}
		byNamespace := Claim{Target: target, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
			ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
		w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: func(string) labels.Set { return nil }})
		w.byGVR[cms.GVR] = []Claim{byNamespace, byLabel("app", "web", false)}
		w.informers[cms.GVR] = listedInformer(t, true, configMap("shop", "x", map[string]string{"app": "web"}))
		w.NamespaceRelabelled("shop", labels.Set{"env": "prod"}, nil)
		for _, cs := range sink.got {
			assert.Empty(t, cs, "the WatchRule-like claim in shop still selects it")
		}
	})
}

func TestAnObjectEnteringTheSelectionOfARuleThatMirrorsOnlyCreations(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	createOnly := Claim{Target: target, Resource: cms, Namespace: "shop", ObjectSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), Create: true}
	t.Run("writes it only if Git has no document for it when its labels bring it in", func(t *testing.T) {
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard()})
		w.byGVR[cms.GVR] = []Claim{createOnly}
		before := configMap("shop", "x", nil)
		before.SetResourceVersion("1")
		after := configMap("shop", "x", map[string]string{"env": "prod"})
		after.SetResourceVersion("2")
		w.onEvent(cms.GVR, before, after, false)
		require.Len(t, sink.got, 1)
		require.Len(t, sink.got[0], 1)
		assert.True(t, sink.got[0][0].CreateOnly)
	})
	t.Run("writes a new object in full", func(t *testing.T) {
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard()})
		w.byGVR[cms.GVR] = []Claim{createOnly}
		w.onEvent(cms.GVR, nil, configMap("shop", "x", map[string]string{"env": "prod"}), false)
		require.Len(t, sink.got, 1)
		require.Len(t, sink.got[0], 1)
		assert.False(t, sink.got[0][0].CreateOnly, "a created object's state is written, even over an old document of its name")
		assert.False(t, sink.got[0][0].Relisted, "a write takes the object into its writer's window")
	})
	t.Run("writes in full an object deleted and created again while the watch was cut", func(t *testing.T) {
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard()})
		mirrorsDeletes := createOnly
		mirrorsDeletes.Delete = true
		w.byGVR[cms.GVR] = []Claim{mirrorsDeletes}
		before := configMap("shop", "x", map[string]string{"env": "prod"})
		before.SetUID("first")
		before.SetResourceVersion("1")
		after := configMap("shop", "x", map[string]string{"env": "prod"})
		after.SetUID("second")
		after.SetResourceVersion("9")
		after.Object["data"] = map[string]any{"k": "new"}

		w.onEvent(cms.GVR, before, after, false) // as a re-list reports it: one update

		var got []string
		for _, cs := range sink.got {
			for _, ch := range cs {
				got = append(got, fmt.Sprintf("deleted=%v createOnly=%v", ch.Deleted, ch.CreateOnly))
			}
		}
		assert.Equal(t, []string{"deleted=true createOnly=false", "deleted=false createOnly=false"}, got,
			"the first one's deletion, then the second one's creation: not an update its rule does not mirror")
	})
	t.Run("writes it only if Git has no document for it when its namespace's labels bring it in", func(t *testing.T) {
		sink := &submissions{}
		byNamespace := Claim{Target: target, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
			ObjectSelector: labels.Everything(), Create: true}
		w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: func(string) labels.Set { return labels.Set{"env": "prod"} }})
		w.byGVR[cms.GVR] = []Claim{byNamespace}
		w.informers[cms.GVR] = listedInformer(t, true, configMap("shop", "x", nil))
		w.NamespaceRelabelled("shop", nil, labels.Set{"env": "prod"})
		require.Len(t, sink.got, 1)
		require.Len(t, sink.got[0], 1)
		assert.True(t, sink.got[0][0].CreateOnly)
	})
}

func TestANamespaceThatJoinsTwoRulesOfATargetAgreesPerObject(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	byNamespace := func(update, del bool) Claim {
		return Claim{Target: target, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
			ObjectSelector: labels.Everything(), Create: true, Update: update, Delete: del}
	}
	for _, order := range [][]Claim{{byNamespace(true, true), byNamespace(false, false)}, {byNamespace(false, false), byNamespace(true, true)}} {
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: func(string) labels.Set { return labels.Set{"env": "prod"} }})
		w.byGVR[cms.GVR] = order
		w.informers[cms.GVR] = listedInformer(t, true, configMap("shop", "x", nil))
		w.NamespaceRelabelled("shop", nil, labels.Set{"env": "prod"})
		var got []batch.Change
		for _, cs := range sink.got {
			got = append(got, cs...)
		}
		require.NotEmpty(t, got)
		for _, c := range got {
			assert.False(t, c.CreateOnly, "one rule mirrors updates, whichever comes last")
		}
	}
}

func TestAnEventInANamespaceNobodyCouldReadIsSubmitted(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	claim := Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: cms,
		NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	for name, known := range map[string]bool{
		"submits a new object of a namespace neither the cache nor the API server could give the labels of": false,
		"submits nothing for a known namespace whose labels the selector does not match":                    true,
	} {
		t.Run(name, func(t *testing.T) {
			sink := &submissions{}
			w := New(Options{Sink: sink, Log: logr.Discard(),
				FreshNamespaceLabels: func(string) labels.Set { return nil }, // the live lookup timed out, or no labels
				NamespaceKnown:       func(string) bool { return known }})
			w.byGVR[cms.GVR] = []Claim{claim}
			w.onEvent(cms.GVR, nil, configMap("brand-new", "app", nil), false)
			var got []batch.Change
			for _, cs := range sink.got {
				got = append(got, cs...)
			}
			if known {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1, "the writer waits for the namespace cache, then decides")
			assert.False(t, got[0].Deleted)
		})
	}
}

func TestAMaybeSelectedObjectInAnUnreadableNamespaceKeepsAnotherRulesRemoval(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	live := types.NamespacedName{Namespace: "ops", Name: "live"}
	byName := Claim{Target: live, Resource: cms, Namespace: "brand-new", ObjectSelector: labels.SelectorFromSet(labels.Set{"app": "x"}),
		Create: true, Update: true, Delete: true}
	byLabels := Claim{Target: live, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
		ObjectSelector: labels.Everything(), Create: true, Update: true}
	sink := &submissions{}
	w := New(Options{Sink: sink, Log: logr.Discard(),
		FreshNamespaceLabels: func(string) labels.Set { return nil }, NamespaceKnown: func(string) bool { return false }})
	w.byGVR[cms.GVR] = []Claim{byName, byLabels}
	w.onEvent(cms.GVR, configMap("brand-new", "app", map[string]string{"app": "x"}), configMap("brand-new", "app", map[string]string{"app": "y"}), false)
	var got []batch.Change
	for _, cs := range sink.got {
		got = append(got, cs...)
	}
	require.NotEmpty(t, got)
	assert.True(t, slices.ContainsFunc(got, func(c batch.Change) bool { return c.Deleted }),
		"it left the rule that named its namespace: removed unless the writer finds the other rule selects it")
}

func TestADeleteJoinsOnlyARecordAsRecentAsItsKindOfDeletion(t *testing.T) {
	obj := func(deleting bool, grace int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "app", "namespace": "team-a"}}}
		if deleting {
			ts := metav1.NewTime(time.Unix(1000, 0))
			u.SetDeletionTimestamp(&ts)
			u.SetDeletionGracePeriodSeconds(&grace)
		}
		return u
	}
	_, waited := deleteRequested(obj(false, 0))
	assert.False(t, waited, "deleted at once: its event follows the request within the watch's lag")
	at, waited := deleteRequested(obj(true, 0))
	assert.True(t, waited)
	assert.Equal(t, time.Unix(1000, 0), at, "it waited for finalizers: asked for at its deletionTimestamp")
	at, _ = deleteRequested(obj(true, 30))
	assert.Equal(t, time.Unix(970, 0), at, "it waited for a grace period, which its deletionTimestamp includes")
}

func TestADeleteOfAnObjectOnlyARuleWithoutDeleteSelectsKeepsItsDocument(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	byNamespace := Claim{Target: target, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	byName := Claim{Target: target, Resource: cms, Namespace: "shop", ObjectSelector: labels.Everything(), Create: true, Update: true}
	deleted := func(nsLabels labels.Set, claims ...Claim) []batch.Change {
		sink := &submissions{}
		w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: func(string) labels.Set { return nsLabels }})
		w.byGVR[cms.GVR] = claims
		w.onDelete(cms.GVR, configMap("shop", "x", nil))
		var got []batch.Change
		for _, cs := range sink.got {
			got = append(got, cs...)
		}
		return got
	}
	t.Run("is nothing once shop left the selector of the rule that mirrors deletions", func(t *testing.T) {
		assert.Empty(t, deleted(labels.Set{"env": "dev"}, byNamespace, byName),
			"a change of it waiting since it left removes nothing: it saw no delete")
	})
	t.Run("is the removal alone while a rule that mirrors deletions selects it", func(t *testing.T) {
		got := deleted(labels.Set{"env": "prod"}, byNamespace, byName)
		require.Len(t, got, 1)
		assert.True(t, got[0].Deleted)
	})
	t.Run("is nothing for a target none of whose rules mirror deletions", func(t *testing.T) {
		assert.Empty(t, deleted(labels.Set{"env": "dev"}, byName))
	})
}

// A rule moves to a CRD's new served version while other rules keep the old version's
// informer: the new informer is started as one replacing it, from what the old one holds.
func TestARuleMovingToAnotherVersionComparesWithTheInformerOthersKeep(t *testing.T) {
	v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	w := New(Options{Log: logr.Discard()})
	_, found := w.otherVersionLocked(v2)
	assert.False(t, found, "no other version is watched")

	w.informers[v1] = listedInformer(t, false, configMap("shop", "kept", nil))
	_, found = w.otherVersionLocked(v2)
	assert.False(t, found, "an informer that has not listed holds nothing to compare with")

	w.informers[v1] = listedInformer(t, true, configMap("shop", "kept", nil))
	before, found := w.otherVersionLocked(v2)
	require.True(t, found)
	assert.Len(t, before, 1, "what the other version's informer holds")
	_, found = w.otherVersionLocked(v1)
	assert.False(t, found, "not the resource's own version")
}

// The store drops a deleted object before the handler has its delete, which may wait
// behind a slow event (a namespace's labels asked of the API server). A rule that moves to
// another version meanwhile leaves that handler with others' claims, or none: the delete
// reaches the rule's target through the hand-over, from what the old informer knows.
func TestADeleteTheHandlerHasNotHadWhenARuleMovesToAnotherVersionIsHandedOver(t *testing.T) {
	v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	labelsOf, release := slowNamespaceLabels(t)
	sink := &countedSubmissions{}
	w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: labelsOf, FreshNamespaceLabels: labelsOf})
	claimAt := func(gvr schema.GroupVersionResource) Claim {
		return Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: Resource{GVR: gvr, Kind: "Widget", Namespaced: true},
			NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	}
	w.byGVR[v1] = []Claim{claimAt(v1)}
	busy, gone := configMap("slow", "busy", nil), configMap("shop", "gone", nil)
	events := watch.NewFake()
	old := watchedInformer(t, events, busy, gone)
	w.handle(v1, old)
	w.informers[v1] = old
	go old.inf.Run(old.ctx.Done())
	require.Eventually(t, old.handled.HasSynced, 10*time.Second, 10*time.Millisecond)

	changed := busy.DeepCopy()
	changed.SetLabels(map[string]string{"tier": "web"})
	changed.SetResourceVersion("2")
	events.Modify(changed) // its handler now waits for the namespace's labels
	deleted := gone.DeepCopy()
	deleted.SetResourceVersion("3")
	events.Delete(deleted)
	require.Eventually(t, func() bool {
		_, inStore, _ := old.inf.GetStore().GetByKey("shop/gone")
		return !inStore
	}, 10*time.Second, 10*time.Millisecond, "the store dropped it; the handler has not had its delete")

	w.mu.Lock() // the rule moves to v2 (syncInformersLocked): others keep v1 for now, or nobody
	before, found := w.otherVersionLocked(v2)
	w.byGVR = map[schema.GroupVersionResource][]Claim{v2: {claimAt(v2)}}
	w.mu.Unlock()
	require.True(t, found)
	release()
	require.Eventually(t, func() bool { calls, _ := sink.seen(); return calls == 2 }, 10*time.Second, 10*time.Millisecond,
		"the old handler had the update it waited on and the delete, with claims that are not the rule's any more")
	deletes := func() (got []batch.Change) {
		_, changes := sink.seen()
		for _, c := range changes {
			if c.Deleted {
				got = append(got, c)
			}
		}
		return got
	}
	require.Empty(t, deletes(), "only the update it had waited on, judged by the claims it read before")

	next := listedInformer(t, false, busy)
	next.listed = &listedSet{objs: map[string]interface{}{}}
	w.handle(v2, next)
	go next.inf.Run(next.ctx.Done())
	next.predecessor = before // as syncInformersLocked starts a replacing one
	w.deletedWhileReplaced(v2, next)

	got := deletes()
	require.Len(t, got, 1)
	assert.Equal(t, "gone", got[0].Key.Name)
	assert.Equal(t, v2, got[0].Key.GVR, "at the version the rule watches now")
}

// A CRD's preferred version changes: the old version's informer stops at once, the new one
// lists a moment later. An object deleted in between is in neither's events.
func TestADeleteWhileAResourcesInformerIsReplacedByAnotherVersionsIsHandedOver(t *testing.T) {
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	widgets := Resource{GVR: v2, Kind: "Widget", Namespaced: true}
	sink := &submissions{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	w.byGVR[v2] = []Claim{{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: widgets, Namespace: "shop",
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}}
	kept, gone := configMap("shop", "kept", nil), configMap("shop", "gone", nil) // as the old version's store held them
	inf := listedInformer(t, false, kept)
	inf.listed = &listedSet{objs: map[string]interface{}{}} // as startInformer makes a replacing one
	w.handle(v2, inf)
	go inf.inf.Run(inf.ctx.Done())

	inf.predecessor = []interface{}{kept, gone}
	w.deletedWhileReplaced(v2, inf)

	require.Len(t, sink.got, 1)
	require.Len(t, sink.got[0], 1)
	assert.Equal(t, "gone", sink.got[0][0].Key.Name)
	assert.True(t, sink.got[0][0].Deleted)
	assert.Equal(t, v2, sink.got[0][0].Key.GVR, "at the version the target watches now")
}

// A CRD's preferred version changes, and an object is relabelled out of the rule's selection
// between the old informer's stop and the new one's list: handed over as that update, its
// document is removed (a snapshot would only count it an orphan); one deleted and created
// again is handed over as both. One relabelled within the selection, or not at all, is the
// snapshot's.
func TestAnObjectRelabelledWhileAResourcesInformerIsReplacedIsHandedOver(t *testing.T) {
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	sink := &submissions{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	w.byGVR[v2] = []Claim{{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: Resource{GVR: v2, Kind: "Widget", Namespaced: true},
		Namespace: "shop", ObjectSelector: labels.SelectorFromSet(labels.Set{"tier": "web"}), Create: true, Update: true, Delete: true}}
	web := map[string]string{"tier": "web"}
	left, stayed, same, again := configMap("shop", "left", web), configMap("shop", "stayed", web), configMap("shop", "same", web), configMap("shop", "again", web)
	leftNow, stayedNow, againNow := left.DeepCopy(), stayed.DeepCopy(), again.DeepCopy()
	leftNow.SetLabels(map[string]string{"tier": "db"})
	stayedNow.SetLabels(map[string]string{"tier": "web", "team": "a"})
	again.SetUID("first")
	againNow.SetUID("second")
	inf := listedInformer(t, false, leftNow, stayedNow, same, againNow)
	inf.listed = &listedSet{objs: map[string]interface{}{}} // as startInformer makes a replacing one
	w.handle(v2, inf)
	go inf.inf.Run(inf.ctx.Done())

	inf.predecessor = []interface{}{left, stayed, same, again}
	w.deletedWhileReplaced(v2, inf)

	var got []string
	for _, cs := range sink.got {
		for _, c := range cs {
			got = append(got, fmt.Sprintf("%s deleted=%v", c.Key.Name, c.Deleted))
		}
	}
	assert.ElementsMatch(t, []string{"left deleted=true", "again deleted=true", "again deleted=false"}, got)
}

// What an informer knows is what its handler had, at the labels it last judged: a relabel
// waiting in its queue has not reached any target yet, so the one replacing it hands it over.
func TestWhatAnInformerKnowsIsWhatItsHandlerHad(t *testing.T) {
	before := configMap("shop", "app", map[string]string{"tier": "web"})
	now := before.DeepCopy()
	now.SetLabels(map[string]string{"tier": "db"})
	fresh := configMap("shop", "fresh", nil)
	inf := listedInformer(t, true, now, fresh)
	inf.handledObjs = map[string]interface{}{"shop/app": before, "shop/gone": configMap("shop", "gone", nil)}

	byName := map[string]map[string]string{}
	for _, o := range inf.known() {
		u := o.(*unstructured.Unstructured)
		byName[u.GetName()] = u.GetLabels()
	}
	assert.Equal(t, map[string]map[string]string{
		"app":   {"tier": "web"}, // as its handler had it
		"gone":  nil,             // its delete waits in the queue
		"fresh": nil,             // its add does
	}, byName)
}

// A CRD's version changes, and changes again before the new version's informer listed (its
// conversion fails, and the change is rolled back): what the first informer knew is handed
// on, and the deletes seen in between reach the target from the last one.
func TestAnInformerReplacedBeforeItListedHandsOnWhatItsPredecessorKnew(t *testing.T) {
	kept, gone := configMap("shop", "kept", nil), configMap("shop", "gone", nil)
	w := New(Options{Log: logr.Discard()})
	unlisted := listedInformer(t, false)
	unlisted.predecessor = []interface{}{kept, gone} // what v1's informer knew when it stopped

	w.mu.Lock()
	handed, ok := unlisted.handOver()
	again, twice := unlisted.handOver()
	w.mu.Unlock()

	require.True(t, ok)
	assert.ElementsMatch(t, []interface{}{kept, gone}, handed)
	assert.False(t, twice, "taken once: its successor hands over from it")
	assert.Empty(t, again)

	synced := listedInformer(t, true, kept)
	synced.predecessor = []interface{}{gone}
	w.mu.Lock()
	handed, ok = synced.handOver()
	w.mu.Unlock()
	require.True(t, ok)
	assert.Len(t, handed, 2, "what it holds, and what its predecessor knew that it has not handed over")
}

// submitted lists the sink's changes as "name deleted=bool", in order.
func submitted(sink *submissions) []string {
	var got []string
	for _, cs := range sink.got {
		for _, ch := range cs {
			got = append(got, fmt.Sprintf("%s deleted=%v", ch.Key.Name, ch.Deleted))
		}
	}
	return got
}

// The relabel read the objects from the store, which already held x's next state (without
// the label the rule selects) while x's handler was behind: only the handler can remove it.
func TestAnUpdateLeavingTheSelectionHandledJustAfterItsNamespaceLeftTooIsStillARemoval(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	claim := Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: cms,
		NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.SelectorFromSet(labels.Set{"app": "web"}),
		Create: true, Update: true, Delete: true}
	sink := &submissions{}
	w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: func(string) labels.Set { return labels.Set{"env": "dev"} }})
	w.byGVR[cms.GVR] = []Claim{claim}
	w.informers[cms.GVR] = listedInformer(t, true)
	w.NamespaceRelabelled("shop", labels.Set{"env": "prod"}, labels.Set{"env": "dev"})

	w.onEvent(cms.GVR, configMap("shop", "x", map[string]string{"app": "web"}), configMap("shop", "x", nil), false)

	assert.Equal(t, []string{"x deleted=true"}, submitted(sink))

	sink.got = nil
	w.relabelled = map[string][]relabel{}
	w.remember("shop", labels.Set{"env": "prod"}, time.Now().Add(-relabelMemory-time.Second))
	w.onEvent(cms.GVR, configMap("shop", "y", map[string]string{"app": "web"}), configMap("shop", "y", nil), false)
	for _, cs := range sink.got {
		assert.Empty(t, cs, "a namespace that left the selector long before is out of it")
	}
}

// An object deleted just before its namespace leaves a rule's selector: the relabel does not
// list it (the store dropped it), and its delete, waiting in the handler's queue, is
// handled after the relabel, when the namespace's labels no longer match.
func TestADeleteHandledJustAfterItsNamespaceLeftTheSelectorIsStillMirrored(t *testing.T) {
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	claim := Claim{Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Resource: cms,
		NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	sink := &submissions{}
	w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: func(string) labels.Set { return nil }}) // the new labels
	w.byGVR[cms.GVR] = []Claim{claim}
	w.informers[cms.GVR] = listedInformer(t, true) // x is gone from the store
	w.NamespaceRelabelled("shop", labels.Set{"env": "prod"}, nil)

	w.onDelete(cms.GVR, configMap("shop", "x", nil))

	assert.Equal(t, []string{"x deleted=true"}, submitted(sink))

	sink.got = nil
	keeps := Claim{Target: claim.Target, Resource: cms, Namespace: "shop", ObjectSelector: labels.Everything(), Create: true, Update: true}
	w.byGVR[cms.GVR] = []Claim{claim, keeps}
	w.onDelete(cms.GVR, configMap("shop", "z", nil))
	for _, cs := range sink.got {
		assert.Empty(t, cs, "another rule of the target, without DELETE, still selects it: its documents stay, as at the relabel")
	}

	sink.got = nil
	w.byGVR[cms.GVR] = []Claim{claim}
	w.NamespaceRelabelled("shop", labels.Set{"team": "a"}, labels.Set{"team": "b"}) // a second relabel within the minute
	w.onDelete(cms.GVR, configMap("shop", "w", nil))
	var removed []string
	for _, cs := range sink.got {
		for _, ch := range cs {
			removed = append(removed, ch.Key.Name)
		}
	}
	assert.Equal(t, []string{"w"}, removed, "judged by the labels before the first relabel too")

	sink.got = nil
	w.relabelled = map[string][]relabel{}
	w.remember("shop", labels.Set{"env": "prod"}, time.Now().Add(-relabelMemory-time.Second))
	w.onDelete(cms.GVR, configMap("shop", "y", nil))
	for _, cs := range sink.got {
		assert.Empty(t, cs, "a namespace that left the selector long before is out of it")
	}
}
