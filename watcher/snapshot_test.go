package watcher

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// snapshots records what the watcher hands the writer.
type snapshots struct {
	got     []batch.Snapshot
	changes []batch.Change
}

func (s *snapshots) Submit(chs ...batch.Change)                                  { s.changes = append(s.changes, chs...) }
func (s *snapshots) Snapshot(snap batch.Snapshot)                                { s.got = append(s.got, snap) }
func (s *snapshots) Watched(types.NamespacedName, []schema.GroupVersionResource) {}

// snapshot is snapshotWith for claims read now.
func (w *Watcher) snapshot(target types.NamespacedName, cs []Claim, objs []interface{}) {
	w.snapshotWith(target, cs, objs, w.rulesLoaded())
}

func TestSnapshotScopes(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	claim := func(ns string, del bool) Claim {
		return Claim{Target: target, Resource: cms, Namespace: ns, ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: del}
	}
	tests := []struct {
		name           string
		claims         []Claim
		listed, pruned map[string]bool
	}{
		{name: "prunes only the namespaces whose rule mirrors deletions",
			claims: []Claim{claim("team-a", false), claim("team-b", true)},
			listed: map[string]bool{"team-a": true, "team-b": true, "team-c": false},
			pruned: map[string]bool{"team-a": false, "team-b": true, "team-c": false}},
		{name: "prunes nothing when no rule mirrors deletions",
			claims: []Claim{claim("team-a", false)},
			listed: map[string]bool{"team-a": true},
			pruned: map[string]bool{"team-a": false}},
		{name: "prunes a namespace two rules cover when either mirrors deletions",
			claims: []Claim{claim("team-a", false), claim("team-a", true)},
			listed: map[string]bool{"team-a": true},
			pruned: map[string]bool{"team-a": true}},
	}
	t.Run("prunes only what a rule that mirrors deletions selects, beside one that does not in the same namespace", func(t *testing.T) {
		selecting := func(app string, del bool) Claim {
			c := claim("team-a", del)
			c.ObjectSelector = labels.SelectorFromSet(labels.Set{"app": app})
			return c
		}
		sink := &snapshots{}
		New(Options{Sink: sink, Log: logr.Discard()}).snapshot(target, []Claim{selecting("a", true), selecting("b", false)}, nil)
		require.Len(t, sink.got, 1)
		assert.True(t, sink.got[0].Prunable("team-a", map[string]string{"app": "a"}))
		assert.False(t, sink.got[0].Prunable("team-a", map[string]string{"app": "b"}), "rule b keeps its documents")
		assert.False(t, sink.got[0].Prunable("team-a", nil), "a document no rule selects is kept")
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &snapshots{}
			New(Options{Sink: sink, Log: logr.Discard()}).snapshot(target, tt.claims, nil)
			require.Len(t, sink.got, 1)
			for ns, want := range tt.listed {
				assert.Equal(t, want, sink.got[0].InScope(ns), "listed %s", ns)
			}
			for ns, want := range tt.pruned {
				assert.Equal(t, want, sink.got[0].Prunable(ns, nil), "pruned %s", ns)
			}
		})
	}
}

func TestASnapshotCountsNoiseAsPresentWithoutWritingIt(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	rule := Claim{Target: target, Resource: cms, Namespace: "team-a", ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	rootCA := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kube-root-ca.crt", "namespace": "team-a"}}}
	sink := &snapshots{}
	New(Options{Sink: sink, Log: logr.Discard()}).snapshot(target, []Claim{rule}, []any{rootCA})
	assert.Empty(t, sink.changes, "never written while --capture-kube-root-ca is off")
	require.Len(t, sink.got, 1)
	assert.Equal(t, []batch.ObjectKey{{GVR: cms.GVR, Kind: "ConfigMap", Namespace: "team-a", Name: "kube-root-ca.crt"}}, sink.got[0].Present,
		"it exists: a document written while the flag was on is no orphan, so prune mode Always keeps it")
}

func TestASnapshotFollowsTheOperationsOfTheRulesThatSelectAnObject(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	claim := func(create, update, del bool) Claim {
		return Claim{Target: target, Resource: cms, Namespace: "team-a", ObjectSelector: labels.Everything(), Create: create, Update: update, Delete: del}
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "namespace": "team-a"}}}
	tests := []struct {
		name    string
		claims  []Claim
		written bool
		create  bool
	}{
		{name: "writes the current state through a rule that mirrors updates", claims: []Claim{claim(true, true, false)}, written: true},
		{name: "only creates a missing document through a rule that mirrors creations but not updates",
			claims: []Claim{claim(true, false, true)}, written: true, create: true},
		{name: "writes the current state when another selecting rule mirrors updates",
			claims: []Claim{claim(true, false, false), claim(false, true, false)}, written: true},
		{name: "writes nothing through a rule that mirrors only deletes, yet lists the object as present",
			claims: []Claim{claim(false, false, true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &snapshots{}
			New(Options{Sink: sink, Log: logr.Discard()}).snapshot(target, tt.claims, []any{cm})
			require.Len(t, sink.got, 1)
			assert.Len(t, sink.got[0].Present, 1)
			if !tt.written {
				assert.Empty(t, sink.changes)
				return
			}
			require.Len(t, sink.changes, 1)
			assert.Equal(t, tt.create, sink.changes[0].CreateOnly)
			assert.True(t, sink.changes[0].Relisted, "a list says nothing of who changed the object")
		})
	}
}

func TestASnapshotHandsOverAnObjectOfANamespaceTheCacheHasNotSeenYet(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	bySelector := Claim{Target: target, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"team": "a"}),
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "app", "namespace": "new"}}}
	sink := &snapshots{}
	New(Options{Sink: sink, Log: logr.Discard(),
		NamespaceLabels: func(string) labels.Set { return nil },
		NamespaceKnown:  func(string) bool { return false }, // created a moment before the list
	}).snapshot(target, []Claim{bySelector}, []any{obj})
	require.Len(t, sink.changes, 1, "its add was left to the snapshot: the writer waits until the namespace is known")
	assert.Equal(t, "app", sink.changes[0].Key.Name)
	require.Len(t, sink.got, 1)
	assert.Empty(t, sink.got[0].Present, "not known to be selected")
	assert.False(t, sink.got[0].InScope("new"), "so its namespace's documents are neither orphans nor pruned")
}

func TestASnapshotJudgesTheDocumentsOfANamespaceDeletedWhileNobodyWatched(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	bySelector := func(del bool, app string) Claim {
		c := Claim{Target: target, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"team": "a"}),
			ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: del}
		if app != "" {
			c.ObjectSelector = labels.SelectorFromSet(labels.Set{"app": app})
		}
		return c
	}
	byName := func(ns string, del bool) Claim {
		return Claim{Target: target, Resource: cms, Namespace: ns, ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: del}
	}
	everyNamespace := func(del bool) Claim {
		return Claim{Target: target, Resource: cms, NamespaceSelector: labels.Everything(), ObjectSelector: labels.Everything(),
			Create: true, Update: true, Delete: del}
	}
	objectIn := func(ns string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "other", "namespace": ns}}}
	}
	nsLabels := map[string]labels.Set{"team-a": {"team": "a"}, "left": {"team": "b"}}
	tests := []struct {
		name     string
		claims   []Claim
		ns       string
		docLabel map[string]string
		objs     []any
		listed   bool
		pruned   bool
	}{
		{name: "prunes them when every rule that could have selected them mirrors deletions",
			claims: []Claim{bySelector(true, "")}, ns: "gone", listed: true, pruned: true},
		{name: "keeps them when a rule that could have selected them does not mirror deletions",
			claims: []Claim{bySelector(true, ""), bySelector(false, "")}, ns: "gone", listed: true, pruned: false},
		{name: "keeps them when a rule naming that namespace does not mirror deletions",
			claims: []Claim{bySelector(true, ""), byName("gone", false)}, ns: "gone", listed: true, pruned: false},
		{name: "judges only the rules whose object selector matches the document",
			claims: []Claim{bySelector(true, "web"), bySelector(false, "db")}, ns: "gone", docLabel: map[string]string{"app": "web"}, listed: true, pruned: true},
		{name: "keeps a document no rule could have selected",
			claims: []Claim{bySelector(true, "web")}, ns: "gone", docLabel: map[string]string{"app": "db"}, listed: true, pruned: false},
		{name: "does not list a namespace that exists but left the selector, since a narrowed rule looks the same",
			claims: []Claim{bySelector(true, "")}, ns: "left", listed: false, pruned: false},
		{name: "lists and prunes a namespace the selector still takes in, as before",
			claims: []Claim{bySelector(true, "")}, ns: "team-a", listed: true, pruned: true},
		{name: "leaves a deleted namespace to a rule of other namespaces by name",
			claims: []Claim{byName("team-a", true)}, ns: "gone", listed: false, pruned: false},
		{name: "keeps them when a rule for every namespace mirrors deletions but one whose selector took that namespace in does not",
			claims: []Claim{everyNamespace(true), bySelector(false, "")}, ns: "gone", listed: true, pruned: false},
		{name: "prunes them when the only rule, for every namespace, mirrors deletions",
			claims: []Claim{everyNamespace(true)}, ns: "gone", listed: true, pruned: true},
		{name: "judges a namespace with a listed object by its labels, though the namespace cache has not seen it yet",
			claims: []Claim{bySelector(true, "")}, ns: "new", objs: []any{objectIn("new")}, listed: false, pruned: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &snapshots{}
			New(Options{Sink: sink, Log: logr.Discard(),
				NamespaceLabels: func(ns string) labels.Set { return nsLabels[ns] },
				NamespaceKnown:  func(ns string) bool { _, ok := nsLabels[ns]; return ok },
			}).snapshot(target, tt.claims, tt.objs)
			require.Len(t, sink.got, 1)
			assert.Equal(t, tt.listed, sink.got[0].InScope(tt.ns), "listed")
			assert.Equal(t, tt.pruned, sink.got[0].Prunable(tt.ns, tt.docLabel), "pruned")
		})
	}
}
