package batch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

func TestOrphans(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	id := func(kind, ns, name string) manifest.Identity {
		return manifest.Identity{Kind: kind, Namespace: ns, Name: name}
	}
	key := func(ns, name string) ObjectKey {
		return ObjectKey{GVR: cms, Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	only := func(ns string) func(string) bool { return func(n string) bool { return n == ns } }
	inGit := []manifest.Identity{id("ConfigMap", "a", "kept"), id("ConfigMap", "a", "gone"), id("ConfigMap", "b", "other-ns"),
		id("Secret", "a", "other-kind"), {Group: "apps", Kind: "ConfigMap", Namespace: "a", Name: "other-group"}}
	cases := []struct {
		name string
		s    Snapshot
		want []manifest.Identity
	}{
		{"finds a document whose object the complete list lacks", Snapshot{GVR: cms, Kind: "ConfigMap", InScope: only("a"), Present: []ObjectKey{key("a", "kept")}},
			[]manifest.Identity{id("ConfigMap", "a", "gone")}},
		{"leaves namespaces outside the listed scope alone", Snapshot{GVR: cms, Kind: "ConfigMap", InScope: only("b"), Present: nil},
			[]manifest.Identity{id("ConfigMap", "b", "other-ns")}},
		{"finds nothing when every document is listed", Snapshot{GVR: cms, Kind: "ConfigMap", InScope: only("a"), Present: []ObjectKey{key("a", "kept"), key("a", "gone")}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Orphans(inGit, tc.s))
		})
	}
}

func TestASnapshotHandsOverTheRecoveredDeletionsOfWhatItListedOrAllOnceEveryRuleIsIn(t *testing.T) {
	key := func(ns string) ObjectKey {
		return ObjectKey{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespace: ns, Name: "gone"}
	}
	waiting := []ObjectKey{key("a"), key("b")}
	onlyA := func(ns string) bool { return ns == "a" }
	assert.Equal(t, []ObjectKey{key("a")}, takenBy(Snapshot{InScope: onlyA}, waiting),
		"b's rule may not be registered yet: its deletion waits for it, or read as not watched it would be dropped")
	assert.Equal(t, waiting, takenBy(Snapshot{InScope: onlyA, Complete: true}, waiting),
		"every rule is in: a namespace no rule lists now (relabelled while down) still gets the deletion seen before")
}

func TestARecoveredDeletionAgesWhileItWaitsForItsList(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	target := liveKey
	key := func(name string) ObjectKey {
		return ObjectKey{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "a", Name: name}
	}
	recovered := func(name string, age time.Duration) recoveredDelete {
		return recoveredDelete{Change: Change{Target: target, Key: key(name), Deleted: true, Author: "alice"}, At: now.Add(-age)}
	}
	m := &Manager{recovered: map[types.NamespacedName]map[ObjectKey]recoveredDelete{target: {
		key("recent"): recovered("recent", 6*24*time.Hour),
		key("stale"):  recovered("stale", 8*24*time.Hour), // loaded at six days, its list came two days later
	}}}
	got := m.takeRecovered(target, []ObjectKey{key("recent"), key("stale")}, now)
	assert.Equal(t, []Change{recovered("recent", 0).Change}, got,
		"a deletion older than a week counts as made while the operator was down, as a start would have dropped it")
	assert.Empty(t, m.recovered, "both are taken: the stale one is not handed over later either")
}

func TestAnOrphanWhoseObjectComesBackIsCountedNoMore(t *testing.T) {
	key, obj := clusterConfigMap("a", "new")
	cluster := fixedResolver{}
	m, _ := registeredManagerWith(t, map[string]string{"live/app/configmaps/a.yaml": configMapDoc("a", "old")}, Options{Resolver: cluster})
	m.Snapshot(Snapshot{Target: liveKey, GVR: key.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true }, Complete: true})
	st, _ := m.Status(liveKey)
	require.Equal(t, 1, st.Orphans, "deleted while nobody watched")

	cluster[key] = obj // created again: its event comes, no list
	m.Submit(Change{Target: liveKey, Key: key})
	_, err := m.workerOf(liveKey).flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	st, _ = m.Status(liveKey)
	assert.Equal(t, 0, st.Orphans, "not until the next list of its resource, which may be days away")
}

// A list taken before the object's creation arrives after a plan wrote the object's
// document (a large list takes its time to hand over): the object is no orphan.
func TestASnapshotDoesNotCountAnObjectCreatedSinceItsListAsAnOrphan(t *testing.T) {
	key, obj := clusterConfigMap("a", "new")
	cluster := fixedResolver{key: obj}
	m, _ := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"}, Options{Resolver: cluster})
	m.Submit(Change{Target: liveKey, Key: key, Author: "alice"})
	_, err := m.workerOf(liveKey).flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)

	m.Snapshot(Snapshot{Target: liveKey, GVR: key.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true }, Complete: true})

	st, _ := m.Status(liveKey)
	assert.Equal(t, 0, st.Orphans, "the cache holds it now")
	delete(cluster, key) // and once it is gone, the next list counts it
	m.Snapshot(Snapshot{Target: liveKey, GVR: key.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true }, Complete: true})
	st, _ = m.Status(liveKey)
	assert.Equal(t, 1, st.Orphans)
}

func TestARefusalAtAVersionTheTargetWatchesNoMoreGoesWithTheListOfTheNewOne(t *testing.T) {
	key, obj := clusterConfigMap("..", "new") // a name no file can have
	key.GVR.Version = "v1beta1"
	m, _ := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"}, Options{Resolver: fixedResolver{key: obj}})
	m.Submit(Change{Target: liveKey, Key: key})
	_, err := m.workerOf(liveKey).flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	st, _ := m.Status(liveKey)
	require.Len(t, st.Refused, 1)

	v1 := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	listV1 := Snapshot{Target: liveKey, GVR: v1, Kind: "ConfigMap", InScope: func(string) bool { return true }, Complete: true}
	m.Watched(liveKey, []schema.GroupVersionResource{key.GVR, v1})
	m.Snapshot(listV1)
	st, _ = m.Status(liveKey)
	assert.Len(t, st.Refused, 1, "while v1beta1 is watched too, its own list speaks for it")

	m.Watched(liveKey, []schema.GroupVersionResource{v1}) // the CRD's preferred version moved; then the object was deleted
	m.Snapshot(listV1)
	st, _ = m.Status(liveKey)
	assert.Empty(t, st.Refused, "no list of v1beta1 comes again")
}
