package watcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// A rule moves to a CRD's new version that another rule's informer already watches. The
// old version's handler lags behind a slow event (a namespace's labels asked of the API
// server) and has not had a delete yet; the new version's handler had it before the rule
// came, for the other rule only. The rule's target is handed that delete once.
func TestARuleMovingToAVersionAnotherRuleWatchesIsHandedTheDeleteNeitherInformerGaveIt(t *testing.T) {
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
	w.rebuildLocked()
	for gvr, inf := range map[schema.GroupVersionResource]*informer{v1: old, v2: kept} {
		w.handle(gvr, inf)
		w.informers[gvr] = inf
		go inf.inf.Run(inf.ctx.Done())
	}
	w.recordLocked() // as syncInformersLocked leaves two versions of one resource
	w.mu.Unlock()
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
	type byGVR = map[schema.GroupVersionResource][]Claim
	for _, tc := range []struct {
		name          string
		before, after byGVR
		want          []Claim
	}{
		{"a claim that moved from another version of the resource joins",
			byGVR{v1: {claim("live", v1)}, v2: {claim("other", v2)}},
			byGVR{v2: {claim("other", v2), claim("live", v2)}},
			[]Claim{claim("live", v2)}},
		{"a claim that was there before does not join",
			byGVR{v1: {claim("live", v1)}, v2: {claim("live", v2)}},
			byGVR{v2: {claim("live", v2)}},
			nil},
		{"a new claim of a target that watched no other version does not join: there was nothing to lose",
			byGVR{v1: {claim("other", v1)}, v2: {claim("other", v2)}},
			byGVR{v1: {claim("other", v1)}, v2: {claim("other", v2), claim("live", v2)}},
			nil},
		{"a claim that comes from another resource does not join",
			byGVR{gadgets: {claim("live", gadgets)}, v2: {claim("other", v2)}},
			byGVR{v2: {claim("other", v2), claim("live", v2)}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, joiningClaims(tc.before, tc.after, v2))
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
