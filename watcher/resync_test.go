package watcher

import (
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

// lockedSnapshots records, safely across goroutines, what the watcher hands the writer.
type lockedSnapshots struct {
	mu      sync.Mutex
	got     []batch.Snapshot
	changes []batch.Change
	watched map[types.NamespacedName][]schema.GroupVersionResource
}

func (s *lockedSnapshots) Watched(target types.NamespacedName, gvrs []schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched == nil {
		s.watched = map[types.NamespacedName][]schema.GroupVersionResource{}
	}
	s.watched[target] = gvrs
}

func (s *lockedSnapshots) watchedOf(target types.NamespacedName) ([]schema.GroupVersionResource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gvrs, ok := s.watched[target]
	return gvrs, ok
}

func (s *lockedSnapshots) Submit(chs ...batch.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, chs...)
}

func (s *lockedSnapshots) Snapshot(snap batch.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, snap)
}

func (s *lockedSnapshots) snapshots() []batch.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]batch.Snapshot(nil), s.got...)
}

// An informer that has not synced stands for a list that keeps failing (a conversion webhook
// down); it is started by hand once the rule has changed, which a real API server could not
// be made to do on cue.
func TestASnapshotWaitingForItsListFollowsTheRulesAsTheyAreOnceItHasIt(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	claim := func(del bool) Claim {
		return Claim{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true}, Namespace: "team-a",
			ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: del}
	}
	sink := &lockedSnapshots{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	inf := listedInformer(t, false, configMap("team-a", "app", nil))
	w.informers[gvr] = inf
	w.byGVR[gvr] = []Claim{claim(true)}
	close(w.started)

	w.Resync(target)
	time.Sleep(100 * time.Millisecond) // the resync reads the claims, then waits for the list
	w.mu.Lock()
	w.byGVR[gvr] = []Claim{claim(false)} // the rule no longer mirrors deletions
	w.mu.Unlock()
	go inf.inf.Run(inf.ctx.Done())

	require.Eventually(t, func() bool { return len(sink.snapshots()) == 1 }, 10*time.Second, 10*time.Millisecond)
	snap := sink.snapshots()[0]
	assert.True(t, snap.InScope("team-a"))
	assert.False(t, snap.Prunable("team-a", nil), "what the rule keeps now is not pruned by the rule it was")
}

// An informer that has not synced stands for a list that keeps failing, as above. Each rule
// change or folder made writable resyncs the target: its waits must not pile up, one
// goroutine and, once the list is in, one snapshot each.
func TestResyncsWaitingForAListThatKeepsFailingWaitAsOne(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	sink := &lockedSnapshots{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	inf := listedInformer(t, false, configMap("team-a", "app", nil))
	w.informers[gvr] = inf
	w.byGVR[gvr] = []Claim{{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true},
		Namespace: "team-a", ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}}
	close(w.started)

	for range 20 {
		w.Resync(target)
	}
	require.Eventually(t, func() bool { _, waits := inf.resyncing.Load(target); return waits }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // each resync reads the claims, then waits for the list
	go inf.inf.Run(inf.ctx.Done())

	require.Eventually(t, func() bool { return len(sink.snapshots()) > 0 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // an absence has no signal: other waiters would have woken by now
	// One; two when a resync's goroutine, slowed by a loaded machine, came after the first
	// waiter saw the list (its own snapshot is then a later one, as it should be).
	assert.LessOrEqual(t, len(sink.snapshots()), 2, "not one per resync")

	taken := len(sink.snapshots())
	w.Resync(target) // the list is in: a later resync snapshots again
	require.Eventually(t, func() bool { return len(sink.snapshots()) == taken+1 }, 10*time.Second, 10*time.Millisecond)
}

// The rules register one by one after a restart: a snapshot taken before the last one is in
// must not prune what that rule may still select.
func TestASnapshotPrunesNothingUntilEveryRuleIsRegistered(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	claim := func(del bool) Claim {
		return Claim{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true}, Namespace: "team-a",
			ObjectSelector: labels.SelectorFromSet(labels.Set{"app": "x"}), Create: true, Update: true, Delete: del}
	}
	for name, last := range map[string][]Claim{
		"prunes once the last rule registers with claims of its own":              {claim(false)},
		"prunes once the last rule registers without claims (its target missing)": nil,
	} {
		t.Run(name, func(t *testing.T) {
			sink := &lockedSnapshots{}
			w := New(Options{Sink: sink, Log: logr.Discard(), RuleKeys: func() ([]string, bool) {
				return []string{"ClusterWatchRule/a", "WatchRule/team-a/b"}, true
			}})
			w.informers[gvr] = listedInformer(t, true, configMap("team-a", "app", map[string]string{"app": "y"}))
			close(w.started)

			w.SetRule("ClusterWatchRule/a", []Claim{claim(true)})
			require.Eventually(t, func() bool { return len(sink.snapshots()) == 1 }, 10*time.Second, 10*time.Millisecond)
			assert.Nil(t, sink.snapshots()[0].Prunable, "rule b, not registered yet, may select what rule a no longer does")
			assert.NotNil(t, sink.snapshots()[0].InScope, "orphans are still counted")
			assert.False(t, sink.snapshots()[0].Complete, "recovered deletions of namespaces it did not list wait")

			w.SetRule("WatchRule/team-a/b", last)
			require.Eventually(t, func() bool { return len(sink.snapshots()) >= 2 }, 10*time.Second, 10*time.Millisecond)
			got := sink.snapshots()[len(sink.snapshots())-1]
			require.NotNil(t, got.Prunable, "every rule is in: the snapshot taken again prunes")
			assert.True(t, got.Prunable("team-a", map[string]string{"app": "x"}))
			assert.True(t, got.Complete)
		})
	}
}

// A rule naming a resource of an API that fails discovery may select, through it, what its
// target's other rules no longer do: until it resolves, that target's lists prune nothing.
// Other targets' do, and the webhook counts the rule as loaded.
func TestASnapshotPrunesNothingWhileARuleOfItsTargetWaitsForAnAPI(t *testing.T) {
	live, other := types.NamespacedName{Namespace: "ops", Name: "live"}, types.NamespacedName{Namespace: "ops", Name: "other"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	claim := func(target types.NamespacedName) Claim {
		return Claim{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true}, Namespace: "team-a",
			ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	}
	sink := &lockedSnapshots{}
	w := New(Options{Sink: sink, Log: logr.Discard(), RuleKeys: func() ([]string, bool) {
		return []string{"WatchRule/team-a/a", "WatchRule/team-a/b", "WatchRule/team-a/c"}, true
	}})
	w.informers[gvr] = listedInformer(t, true, configMap("team-a", "app", nil))
	close(w.started)
	last := func(target types.NamespacedName) (batch.Snapshot, bool) {
		var out batch.Snapshot
		found := false
		for _, s := range sink.snapshots() {
			if s.Target == target {
				out, found = s, true
			}
		}
		return out, found
	}

	w.SetRuleWaiting("WatchRule/team-a/b", live, nil) // its resource's API fails discovery
	w.SetRule("WatchRule/team-a/a", []Claim{claim(live)})
	w.SetRule("WatchRule/team-a/c", []Claim{claim(other)})
	require.Eventually(t, func() bool {
		s, ok := last(other)
		_, lived := last(live) // each target's snapshot runs on its own: neither waits for the other
		return ok && s.Complete && lived
	}, 10*time.Second, 10*time.Millisecond, "every rule is in: the other target's list prunes")
	s, ok := last(live)
	require.True(t, ok)
	assert.False(t, s.Complete, "rule b may select what rule a no longer does")
	assert.Nil(t, s.Prunable)
	assert.True(t, w.Registered([]string{"WatchRule/team-a/b"}), "the webhook does not wait for it")

	w.SetRule("WatchRule/team-a/b", nil) // resolved
	require.Eventually(t, func() bool { s, _ := last(live); return s.Complete }, 10*time.Second, 10*time.Millisecond,
		"once it resolves, the target's list is taken again, complete")
	s, _ = last(live)
	assert.NotNil(t, s.Prunable)
}

func TestARuleChangeTellsTheWriterWhatEachOfItsTargetsIsStillWatchedFor(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	cms := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	secrets := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Kind: "Secret", Namespaced: true}
	claim := func(r Resource) Claim {
		return Claim{Target: target, Resource: r, Namespace: "team-a", ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	}
	sink := &lockedSnapshots{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	w.SetRule("WatchRule/team-a/both", []Claim{claim(cms), claim(secrets)})
	w.SetRule("WatchRule/team-a/secrets", []Claim{claim(secrets)})
	got, _ := sink.watchedOf(target)
	assert.ElementsMatch(t, []schema.GroupVersionResource{cms.GVR, secrets.GVR}, got)

	w.SetRule("WatchRule/team-a/both", nil) // deleted: ConfigMaps are no longer watched, Secrets still are
	got, _ = sink.watchedOf(target)
	assert.Equal(t, []schema.GroupVersionResource{secrets.GVR}, got)

	w.ForgetRule("WatchRule/team-a/secrets")
	got, told := sink.watchedOf(target)
	assert.True(t, told)
	assert.Empty(t, got, "its last rule gone, it is watched for nothing")
	assert.Empty(t, sink.snapshots(), "no informer runs here: no list, no snapshot")
}

// Targets and resources come and go for the life of the process: the lock that orders one
// target's snapshots of a resource must not outlive them.
func TestSnapshotsOfATargetLeaveNoLockBehindOnceDone(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	sink := &lockedSnapshots{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	inf := listedInformer(t, true, configMap("team-a", "app", nil))
	w.informers[gvr] = inf
	w.byGVR[gvr] = []Claim{{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true},
		Namespace: "team-a", ObjectSelector: labels.Everything(), Create: true, Update: true}}

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.snapshotNow(target, gvr, inf)
		}()
	}
	wg.Wait()

	assert.Len(t, sink.snapshots(), 8)
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.snapshotting)
}

// heldSnapshots records snapshots as lockedSnapshots does, each only once the test lets it
// through (gate), so a comparison can be caught in the middle.
type heldSnapshots struct {
	lockedSnapshots
	gate chan struct{}
}

func (s *heldSnapshots) Snapshot(snap batch.Snapshot) {
	<-s.gate
	s.lockedSnapshots.Snapshot(snap)
}

// The watch's cuts are events of a fake watch, which a real API server could not be made to
// cut on cue.
func TestARelistComparisonEndingDoesNotLetASecondOneWaitBesideTheNext(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	sink := &heldSnapshots{gate: make(chan struct{})}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	app := configMap("team-a", "app", nil)
	events := watch.NewFake()
	inf := watchedInformer(t, events, app)
	w.informers[gvr] = inf
	w.byGVR[gvr] = []Claim{{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true}, Namespace: "team-a",
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}}
	close(w.started)
	go inf.inf.Run(inf.ctx.Done())
	require.Eventually(t, inf.inf.HasSynced, 10*time.Second, 10*time.Millisecond)
	moveTo := func(rv string) {
		changed := app.DeepCopy()
		changed.SetResourceVersion(rv)
		events.Modify(changed)
		require.Eventually(t, func() bool { return inf.inf.LastSyncResourceVersion() == rv }, 10*time.Second, 10*time.Millisecond)
	}

	w.afterRelist(gvr, inf) // the watch was cut: a comparison waits for the re-list
	moveTo("2")
	require.Eventually(t, func() bool { return !inf.relisting.Load() }, 10*time.Second, 10*time.Millisecond,
		"the re-list is in: its comparison runs, and a later list is waited for anew")
	w.afterRelist(gvr, inf) // cut again while the first comparison runs
	require.True(t, inf.relisting.Load(), "a second comparison waits for its re-list")
	close(sink.gate) // the first comparison ends
	require.Eventually(t, func() bool { return len(sink.snapshots()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool { return !inf.relisting.Load() }, 300*time.Millisecond, 10*time.Millisecond,
		"the first comparison's end leaves the second one waiting, so a third cut starts no comparison beside it")
}
