package watcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// A rule moves to a CRD's new version that another rule's informer already watches. The
// old version's handler lags behind a slow event (a namespace's labels asked of the API
// server) and has not had a delete yet; the new version's handler had it before the rule
// came, for the other rule only. The rule's target is handed that delete once, whether
// the old version's informer stops or keeps running for a third rule.
func TestARuleMovingToAVersionAnotherRuleWatchesIsHandedTheDeleteNeitherInformerGaveIt(t *testing.T) {
	t.Run("the old version's informer stops", func(t *testing.T) { joinAfterADelete(t, false) })
	t.Run("the old version's informer keeps running for another rule", func(t *testing.T) { joinAfterADelete(t, true) })
}

// joinAfterADelete is the scene of TestARuleMovingToAVersionAnotherRuleWatchesIsHandedTheDeleteNeitherInformerGaveIt;
// keepOld has a third rule keep the old version's informer.
func joinAfterADelete(t *testing.T, keepOld bool) {
	v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	live, other := types.NamespacedName{Namespace: "ops", Name: "live"}, types.NamespacedName{Namespace: "ops", Name: "other"}
	labelsOf, release := slowNamespaceLabels(t)
	sink := &countedSubmissions{}
	w := New(Options{Sink: sink, Log: logr.Discard(), NamespaceLabels: labelsOf, FreshNamespaceLabels: labelsOf})
	moving := func(gvr schema.GroupVersionResource) []Claim {
		return []Claim{{Target: live, Resource: Resource{GVR: gvr, Kind: "Widget", Namespaced: true},
			NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}), ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}}
	}
	staying := []Claim{{Target: other, Resource: Resource{GVR: v2, Kind: "Widget", Namespaced: true}, Namespace: "shop",
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	busy, gone := configMap("slow", "busy", nil), configMap("shop", "gone", nil)
	eventsV1, eventsV2 := watch.NewFake(), watch.NewFake()
	old, kept := watchedInformer(t, eventsV1, busy, gone), watchedInformer(t, eventsV2, busy, gone)
	w.mu.Lock()
	w.ctx = ctx
	w.rules = map[string][]Claim{"moving": moving(v1), "staying": staying}
	if keepOld {
		w.rules["keeping"] = []Claim{{Target: types.NamespacedName{Namespace: "ops", Name: "third"}, Resource: Resource{GVR: v1, Kind: "Widget", Namespaced: true},
			Namespace: "elsewhere", ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}}
	}
	w.rebuildLocked()
	for gvr, inf := range map[schema.GroupVersionResource]*informer{v1: old, v2: kept} {
		w.handle(gvr, inf)
		w.informers[gvr] = inf
		go inf.inf.Run(inf.ctx.Done())
	}
	w.recordLocked() // as syncInformersLocked leaves two versions of one resource
	w.mu.Unlock()
	assert.True(t, kept.recording, "two versions of the resource are watched")
	require.Eventually(t, func() bool { return old.handled.HasSynced() && kept.handled.HasSynced() }, 10*time.Second, 10*time.Millisecond)

	changed := busy.DeepCopy()
	changed.SetLabels(map[string]string{"tier": "web"})
	changed.SetResourceVersion("2")
	eventsV1.Modify(changed) // the old handler now waits for the namespace's labels
	deleted := gone.DeepCopy()
	deleted.SetResourceVersion("3")
	eventsV1.Delete(deleted)
	eventsV2.Delete(deleted)
	deletesFor := func(target types.NamespacedName) (got []batch.Change) {
		_, changes := sink.seen()
		for _, c := range changes {
			if c.Deleted && c.Target == target {
				got = append(got, c)
			}
		}
		return got
	}
	require.Eventually(t, func() bool { return len(deletesFor(other)) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the new version's handler had the delete, before the rule came")
	require.Eventually(t, func() bool {
		_, inStore, _ := old.inf.GetStore().GetByKey("shop/gone")
		return !inStore
	}, 10*time.Second, 10*time.Millisecond, "the old store dropped it; its handler has not had the delete")

	w.SetRule("moving", moving(v2))
	w.mu.RLock()
	_, oldRuns := w.informers[v1]
	w.mu.RUnlock()
	require.Equal(t, keepOld, oldRuns)
	assert.Equal(t, keepOld, kept.recording, "records only while the resource is watched at two versions")
	release()

	require.Eventually(t, func() bool { return len(deletesFor(live)) == 1 }, 10*time.Second, 10*time.Millisecond)
	got := deletesFor(live)[0]
	assert.Equal(t, "gone", got.Key.Name)
	assert.Equal(t, v2, got.Key.GVR, "at the version the rule watches now")
	time.Sleep(200 * time.Millisecond) // the old handler, if it still runs, has the delete with nobody's claims
	assert.Len(t, deletesFor(live), 1, "handed once")
	assert.Len(t, deletesFor(other), 1, "the other rule's target had it from its own handler")
}

// slowNamespaceLabels answers env=prod for every namespace, and for "slow" only once
// release is called (or the test ends): the API server's answer for a namespace the cache
// has not seen, which holds back the handler that asks.
func slowNamespaceLabels(t *testing.T) (labelsOf func(string) labels.Set, release func()) {
	t.Helper()
	released := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	return func(ns string) labels.Set {
		if ns == "slow" {
			<-released
		}
		return labels.Set{"env": "prod"}
	}, release
}

func TestJoiningClaims(t *testing.T) {
	v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	gadgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	claim := func(target string, gvr schema.GroupVersionResource) Claim {
		return Claim{Target: types.NamespacedName{Namespace: "ops", Name: target}, Resource: Resource{GVR: gvr, Namespaced: true},
			Namespace: "shop", ObjectSelector: labels.Everything(), Delete: true}
	}
	narrowed := claim("live", v2)
	narrowed.ObjectSelector = labels.SelectorFromSet(labels.Set{"tier": "web"})
	for _, tc := range []struct {
		name     string
		old, now []Claim
		want     []Claim
	}{
		{"a rule's claim that moved from another version of the resource joins",
			[]Claim{claim("live", v1)}, []Claim{claim("live", v2)}, []Claim{claim("live", v2)}},
		{"only the moved rule's claims at the version joined",
			[]Claim{claim("live", v1), claim("live", gadgets)}, []Claim{claim("live", v2), claim("live", gadgets)}, []Claim{claim("live", v2)}},
		{"a rule edited at the version it already watches does not join, whatever its target's other rules watch",
			[]Claim{claim("live", v2)}, []Claim{narrowed}, nil},
		{"a new rule does not join: it lost nothing in between",
			nil, []Claim{claim("live", v2)}, nil},
		{"a rule that comes from another resource does not join",
			[]Claim{claim("live", gadgets)}, []Claim{claim("live", v2)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, joiningClaims(tc.old, tc.now, v2))
		})
	}
}

func TestRecentlyGone(t *testing.T) {
	t.Run("forgets the deletes older than goneMemory as new ones come", func(t *testing.T) {
		var g recentlyGone
		start := time.Now()
		g.add("shop/a", "a", start)
		g.add("shop/b", "b", start.Add(goneMemory/2))
		g.add("shop/c", "c", start.Add(goneMemory+time.Second))
		assert.NotContains(t, g.byKey, "shop/a")
		assert.Contains(t, g.byKey, "shop/b")
		assert.Len(t, g.order, 2)
	})
	t.Run("keeps a key deleted again when its first delete is forgotten", func(t *testing.T) {
		var g recentlyGone
		start := time.Now()
		g.add("shop/a", "first", start)
		g.add("shop/a", "again", start.Add(goneMemory/2))
		g.add("shop/c", "c", start.Add(goneMemory+time.Second))
		require.Contains(t, g.byKey, "shop/a")
		assert.Equal(t, "again", g.byKey["shop/a"].obj)
	})
	t.Run("hands over only a recent delete of the object the other informer knew, not one it knows again", func(t *testing.T) {
		back := configMap("shop", "back", nil)
		i := listedInformer(t, true, back)
		i.handledObjs = map[string]interface{}{}
		i.record(true)
		now := time.Now()
		object := func(name, uid string) interface{} {
			u := configMap("shop", name, nil)
			u.SetUID(types.UID(uid))
			return u
		}
		i.handledDelete("shop/stale", object("stale", "s"), now.Add(-goneMemory-time.Second))
		i.handledDelete("shop/renamed", object("renamed", "before"), now)
		i.handledDelete("shop/back", object("back", ""), now)
		i.handledDelete("shop/gone", object("gone", "g"), now)
		left := map[string]types.UID{"shop/stale": "s", "shop/renamed": "after", "shop/back": "", "shop/gone": "g", "shop/never": "n"}

		var got []string
		for _, o := range i.goneOf(left, now) {
			got = append(got, o.(*unstructured.Unstructured).GetName())
		}
		assert.Equal(t, []string{"gone"}, got, "not a delete older than goneMemory, of an object created again since, or of one its store has again")
	})
	t.Run("an informer that stops recording forgets what it had", func(t *testing.T) {
		i := &informer{handledObjs: map[string]interface{}{}}
		i.record(true)
		i.handledDelete("shop/a", "a", time.Now())
		assert.Contains(t, i.gone.byKey, "shop/a")
		i.record(false)
		assert.Empty(t, i.gone.byKey)
		i.handledDelete("shop/b", "b", time.Now())
		assert.Empty(t, i.gone.byKey, "nothing recorded while no other version is watched")
	})
}

func TestSelectionChanged(t *testing.T) {
	web := Claim{ObjectSelector: labels.SelectorFromSet(labels.Set{"tier": "web"})}
	obj := func(uid string, lbls map[string]string) interface{} {
		u := configMap("shop", "app", lbls)
		u.SetUID(types.UID(uid))
		return u
	}
	for _, tc := range []struct {
		name        string
		before, now interface{}
		want        bool
	}{
		{"an object relabelled out of a claim's selection changed", obj("1", map[string]string{"tier": "web"}), obj("1", map[string]string{"tier": "db"}), true},
		{"an object relabelled into a claim's selection changed", obj("1", nil), obj("1", map[string]string{"tier": "web"}), true},
		{"a label a conversion sets per version selects alike", obj("1", map[string]string{"tier": "web"}), obj("1", map[string]string{"tier": "web", "version": "v2"}), false},
		{"another object under the name changed, whatever its labels", obj("1", map[string]string{"tier": "web"}), obj("2", map[string]string{"tier": "web"}), true},
		{"what is not an object changed nothing", "shop/app", obj("1", nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, selectionChanged([]Claim{web}, tc.before, tc.now))
		})
	}
}
