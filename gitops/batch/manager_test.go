package batch

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

var (
	liveKey = types.NamespacedName{Namespace: "ops", Name: "live"}
	goneKey = ObjectKey{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "app", Name: "gone"}
)

// registeredManager is a Manager (not started: nothing commits) with GitTarget ops/live on
// branch main of a remote that also has branch other.
func registeredManager(t *testing.T, seed map[string]string) (*Manager, TargetSpec) {
	t.Helper()
	return registeredManagerWith(t, seed, Options{})
}

// pausedResolver finds no object, after pausing the first lookup until release is closed.
type pausedResolver struct {
	once             sync.Once
	reached, release chan struct{}
}

func (r *pausedResolver) Current(types.NamespacedName, ObjectKey) (*unstructured.Unstructured, error) {
	r.once.Do(func() { close(r.reached); <-r.release })
	return nil, nil
}

// registeredManagerWith is registeredManager with the writer's options (it sets Log and WorkDir).
func registeredManagerWith(t *testing.T, seed map[string]string, opts Options) (*Manager, TargetSpec) {
	t.Helper()
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", seed, "seed")
	remote.Seed("other", seed, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	opts.Log, opts.WorkDir = logr.Discard(), t.TempDir()
	if opts.Resolver == nil {
		opts.Resolver = fixedResolver{} // an empty cluster
	}
	m := NewManager(opts)
	spec := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}, Committer: Identity{Name: "W", Email: "w@example.com"}}
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	return m, spec
}

func (m *Manager) workerOf(key types.NamespacedName) *worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.workers[m.targets[key]]
}

func (m *Manager) pendingOf(key types.NamespacedName) int {
	w := m.workerOf(key)
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if q := w.queues[key]; q != nil {
		return q.pending()
	}
	return -1
}

func TestChangesSeenWhileATargetIsReRegisteredOrMoved(t *testing.T) {
	readme := map[string]string{"live/README.md": "objects\n"}
	t.Run("keeps a delete seen while a suspended target registers again and its worker is busy pushing", func(t *testing.T) {
		m, spec := registeredManager(t, readme)
		w := m.workerOf(liveKey)
		m.SuspendTarget(liveKey, "its GitProvider is gone")
		w.mu.Lock() // another target's push in progress
		done := make(chan struct{})
		go func() { _, _ = m.EnsureTarget(context.Background(), spec); close(done) }()
		require.Eventually(t, func() bool { return m.workerOf(liveKey) != nil }, time.Second, time.Millisecond)
		m.Submit(Change{Target: liveKey, Key: goneKey, Deleted: true})
		w.mu.Unlock()
		<-done
		assert.Equal(t, 1, m.pendingOf(liveKey))
	})
	t.Run("keeps a delete seen while a target moves to another branch and its old worker is busy pushing", func(t *testing.T) {
		m, spec := registeredManager(t, readme)
		old := m.workerOf(liveKey)
		old.mu.Lock()
		spec.Branch = "other"
		done := make(chan struct{})
		go func() { _, _ = m.EnsureTarget(context.Background(), spec); close(done) }()
		require.Eventually(t, func() bool { return m.workerOf(liveKey) == nil }, time.Second, time.Millisecond)
		m.Submit(Change{Target: liveKey, Key: goneKey, Deleted: true})
		old.mu.Unlock()
		<-done
		assert.Equal(t, 1, m.pendingOf(liveKey))
		assert.NotSame(t, old, m.workerOf(liveKey))
	})
	t.Run("keeps a change seen while a new target registers on a worker busy pushing", func(t *testing.T) {
		m, spec := registeredManager(t, readme)
		w := m.workerOf(liveKey)
		second := spec
		second.Key, second.Folder = types.NamespacedName{Namespace: "ops", Name: "second"}, "second"
		w.mu.Lock()
		done := make(chan struct{})
		go func() { _, _ = m.EnsureTarget(context.Background(), second); close(done) }()
		require.Eventually(t, func() bool { return m.workerOf(second.Key) != nil }, time.Second, time.Millisecond)
		m.Submit(Change{Target: second.Key, Key: goneKey, Deleted: true})
		w.mu.Unlock()
		<-done
		assert.Equal(t, 1, m.pendingOf(second.Key))
	})
	t.Run("keeps the author of a change newer than the suspended queue's", func(t *testing.T) {
		m, spec := registeredManager(t, readme)
		m.Submit(Change{Target: liveKey, Key: goneKey, Deleted: true, Author: "alice"})
		m.SuspendTarget(liveKey, "its GitProvider is gone")
		m.Submit(Change{Target: liveKey, Key: goneKey, Deleted: true, Author: "bob"})
		_, err := m.EnsureTarget(context.Background(), spec)
		require.NoError(t, err)
		w := m.workerOf(liveKey)
		w.qmu.Lock()
		defer w.qmu.Unlock()
		assert.Equal(t, "bob", w.queues[liveKey].owner[goneKey])
	})
	t.Run("forgets the journal line of a delete that reached a target removed while it was being suspended", func(t *testing.T) {
		m, _ := registeredManager(t, readme)
		w := m.workerOf(liveKey)
		w.mu.Lock() // another target's push in progress: the suspension waits to take the queue
		done := make(chan struct{})
		go func() { m.SuspendTarget(liveKey, "its GitProvider is gone"); close(done) }()
		require.Eventually(t, func() bool { return m.workerOf(liveKey) == nil }, 10*time.Second, time.Millisecond)
		w.submit(Change{Target: liveKey, Key: goneKey, Deleted: true}) // routed to the worker a moment before
		journaled := func() int { m.journal.mu.Lock(); defer m.journal.mu.Unlock(); return len(m.journal.live) }
		require.Equal(t, 1, journaled())
		removed := make(chan struct{})
		go func() { m.RemoveTarget(liveKey); close(removed) }() // its GitTarget deleted meanwhile
		require.Eventually(t, func() bool { return journaled() == 0 }, 10*time.Second, time.Millisecond, "its deletions forgotten")
		submitted := make(chan struct{})
		go func() { w.submit(Change{Target: liveKey, Key: goneKey, Deleted: true}); close(submitted) }() // and another, after
		<-submitted
		w.mu.Unlock()
		<-done
		<-removed
		assert.Zero(t, journaled(), "a GitTarget created again under the name inherits no delete")
	})
	t.Run("keeps the author of a parked change when the snapshot its return asks for comes first", func(t *testing.T) {
		var m *Manager
		var resumed atomic.Bool
		m, spec := registeredManagerWith(t, readme, Options{OnFolderReady: func(k types.NamespacedName) {
			if resumed.Load() { // the watcher's list, handed over before the parked changes are
				m.Submit(Change{Target: k, Key: goneKey, Relisted: true})
			}
		}})
		m.SuspendTarget(liveKey, "its GitProvider is gone")
		m.Submit(Change{Target: liveKey, Key: goneKey, Author: "alice"})
		resumed.Store(true)
		_, err := m.EnsureTarget(context.Background(), spec)
		require.NoError(t, err)
		w := m.workerOf(liveKey)
		w.qmu.Lock()
		defer w.qmu.Unlock()
		assert.Equal(t, "alice", w.queues[liveKey].owner[goneKey], "her change, by the rules of the list that followed it")
	})
	t.Run("does not queue a parked change under its older author while a newer window with the object is being committed", func(t *testing.T) {
		planning := &pausedResolver{reached: make(chan struct{}), release: make(chan struct{})}
		m, _ := registeredManagerWith(t, readme, Options{Resolver: planning})
		w := m.workerOf(liveKey)
		m.Submit(Change{Target: liveKey, Key: goneKey, Deleted: true, Author: "bob"})
		flushed := make(chan struct{})
		go func() {
			_, _ = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
			close(flushed)
		}()
		<-planning.reached // bob's window is detached and being committed

		w.submitOlder(Change{Target: liveKey, Key: goneKey, Deleted: true, Author: "alice"}) // parked before bob's
		close(planning.release)
		<-flushed

		assert.Equal(t, 0, m.pendingOf(liveKey), "bob's commit carried the object; alice's older change adds nothing")
	})
}

func TestASnapshotForgetsRefusalsOfObjectsItNoLongerLists(t *testing.T) {
	t.Run("forgets them in the very snapshot that finds new orphans", func(t *testing.T) {
		m, _ := registeredManager(t, map[string]string{
			"live/app/configmaps/old.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  namespace: app\n"})
		w := m.workerOf(liveKey)
		w.mu.Lock()
		tg := w.targets[liveKey]
		tg.refused = map[ObjectKey]string{goneKey: "ConfigMap app/gone: refused"}
		tg.listRefusals()
		w.mu.Unlock()
		m.Snapshot(Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true }})
		st, _ := m.Status(liveKey)
		require.Equal(t, 1, st.Orphans, "old.yaml: a new orphan")
		assert.Empty(t, st.Refused)
	})
}

func TestATargetWhoseFolderChangesAsksForASnapshotOfTheNewFolder(t *testing.T) {
	var ready []types.NamespacedName
	m, spec := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n", "moved/README.md": "objects\n"},
		Options{OnFolderReady: func(k types.NamespacedName) { ready = append(ready, k) }})
	require.Equal(t, []types.NamespacedName{liveKey}, ready, "the first registration asks for the initial snapshot")

	spec.Folder = "moved" // e.g. the GitTarget deleted and created again with another path, seen as one change
	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)

	assert.Equal(t, []types.NamespacedName{liveKey, liveKey}, ready, "the new folder gets its initial snapshot too")
}

func TestATargetSwitchedToOrFromPruneModeAlwaysAsksForASnapshot(t *testing.T) {
	var ready []types.NamespacedName
	m, spec := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"},
		Options{OnFolderReady: func(k types.NamespacedName) { ready = append(ready, k) }})
	spec.Prune = PruneNever
	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	require.Len(t, ready, 1, "only the initial snapshot: Never removes nothing a snapshot could find")

	spec.Prune = PruneAlways
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, []types.NamespacedName{liveKey, liveKey}, ready, "the orphans the old mode kept are pruned now, not at the next restart")
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	assert.Len(t, ready, 2, "once")

	spec.Prune = PruneOnEvent
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	assert.Len(t, ready, 3, "and back: status.orphans counts again the documents Always was removing")
}

func TestStatusCountsTheOrphansKeptNotThoseBeingPruned(t *testing.T) {
	doc := func(name, team string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: app\n  labels:\n    team: " + team + "\n"
	}
	m, spec := registeredManager(t, map[string]string{
		"live/app/configmaps/a.yaml": doc("a", "mirrored"), "live/app/configmaps/b.yaml": doc("b", "kept")})
	spec.Prune = PruneAlways
	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	m.Snapshot(Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true },
		Prunable: func(_ string, labels map[string]string) bool { return labels["team"] == "mirrored" }})
	st, _ := m.Status(liveKey)
	assert.Equal(t, 1, st.Orphans, "b: its rule does not mirror deletes; a is being removed")
	assert.Equal(t, 1, m.pendingOf(liveKey), "a's removal waits in a window")
}

func TestAnOrphanWhoseLabelsAreEncryptedIsNotJudgedByTheirCiphertext(t *testing.T) {
	// A ConfigMap document carrying sops ciphertext as its label value stands for a Secret
	// file whose person's rule encrypts labels: prunable reads the document's labels alike.
	m, spec := registeredManager(t, map[string]string{"live/app/configmaps/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n" +
		"  labels:\n    env: ENC[AES256_GCM,data:cHJvZA==,iv:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]\n"})
	spec.Prune = PruneAlways
	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	m.Snapshot(Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true },
		Prunable: func(_ string, labels map[string]string) bool { return labels["env"] != "prod" }}) // env notin (prod)
	st, _ := m.Status(liveKey)
	assert.Equal(t, 1, st.Orphans, "kept and reported: its real env may be prod")
	assert.Zero(t, m.pendingOf(liveKey), "no removal waits")
}

func TestStatusCountsOnlyTheOrphansOfResourcesTheTargetIsStillWatchedFor(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	var told []types.NamespacedName
	m, spec := registeredManagerWith(t, map[string]string{
		"live/app/configmaps/old.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  namespace: app\n",
		"live/app/secrets/old.yaml":    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: old\n  namespace: app\n"},
		Options{OnStatus: func(k types.NamespacedName) { told = append(told, k) }})
	everywhere := func(string) bool { return true }
	m.Snapshot(Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", InScope: everywhere})
	m.Snapshot(Snapshot{Target: liveKey, GVR: secrets, Kind: "Secret", InScope: everywhere})
	orphans := func() int {
		st, ok := m.Status(liveKey)
		require.True(t, ok)
		return st.Orphans
	}
	require.Equal(t, 2, orphans(), "one document of each resource, before the watcher said anything")

	told = nil
	m.Watched(liveKey, []schema.GroupVersionResource{secrets}) // the ConfigMaps' rule deleted
	assert.Equal(t, 1, orphans(), "no rule lists ConfigMaps for it any more: their count went with the rule")
	assert.Equal(t, []types.NamespacedName{liveKey}, told, "its controller is told, to write the status")
	m.Watched(liveKey, []schema.GroupVersionResource{secrets})
	assert.Len(t, told, 1, "the same resources again change nothing")

	m.Watched(liveKey, nil) // its last rule deleted
	assert.Equal(t, 0, orphans())
	st, err := m.EnsureTarget(context.Background(), spec) // what its controller reads
	require.NoError(t, err)
	assert.Equal(t, 0, st.Orphans)
	m.Watched(liveKey, []schema.GroupVersionResource{secrets, goneKey.GVR}) // both back, before their snapshots
	assert.Equal(t, 2, orphans(), "until their next snapshots, the counts the last ones found")
}

func TestARequestOfATargetThatCannotRegisterWhereItMovedTimesOut(t *testing.T) {
	m, spec := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
	r := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, UID: "1", Target: liveKey,
		Author: "alice", Message: "release", Deadline: time.Now().Add(100 * time.Millisecond)}
	out, err := m.Request(r)
	require.NoError(t, err)
	require.False(t, out.Done, "waiting for alice's change")

	moved := spec
	moved.Branch = "other" // its clone cannot be made there (a disk fault): a regular file holds its place
	require.NoError(t, os.MkdirAll(filepath.Dir(m.cloneDir(workerKey{url: repo.NormalizeURL(moved.URL), branch: "other"})), 0o755))
	require.NoError(t, os.WriteFile(m.cloneDir(workerKey{url: repo.NormalizeURL(moved.URL), branch: "other"}), []byte("x"), 0o600))
	_, err = m.EnsureTarget(context.Background(), moved)
	require.Error(t, err)

	time.Sleep(150 * time.Millisecond) // past its deadline, in no queue
	out, err = m.Request(r)
	require.NoError(t, err)
	assert.True(t, out.Done, "its controller would otherwise poll a Waiting request forever")
	assert.Equal(t, ReasonTimedOut, out.Reason)
	assert.Contains(t, out.Message, "moved to another repository or branch")
}

func TestARequestOfAMovingTargetIsNotTimedOutBeforeItsRegistrationFailed(t *testing.T) {
	m, _ := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
	r := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, UID: "1", Target: liveKey,
		Author: "alice", Message: "release", Deadline: time.Now().Add(-time.Second)}
	_, err := m.Request(r)
	require.NoError(t, err)
	m.mu.Lock()
	m.requests[r.Key].rehome = true // moving: the old worker may still be pushing its message
	m.mu.Unlock()

	out, err := m.Request(r)
	require.NoError(t, err)
	assert.False(t, out.Done, "a commit under way may still carry it")

	m.unplaced(liveKey) // the registration where it moved failed
	out, err = m.Request(r)
	require.NoError(t, err)
	assert.Equal(t, ReasonTimedOut, out.Reason)
}

// Request hands a request to its worker's queue without the Manager's lock; each case sets
// up what a move or a suspension of its target did in that gap, then takes the answer.
func TestARequestsHandOverAnswersByWhatHappenedToItsTargetMeanwhile(t *testing.T) {
	tracked := func(t *testing.T) (*Manager, *requestState, *worker) {
		m, _ := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
		w := m.workerOf(liveKey)
		st := &requestState{handedTo: w, req: CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"},
			UID: "1", Target: liveKey, Author: "alice", Message: "release", Deadline: time.Now().Add(time.Minute)}}
		m.mu.Lock()
		m.requests[st.req.Key] = st
		m.mu.Unlock()
		return m, st, w
	}
	stillTracked := func(t *testing.T, m *Manager, st *requestState) {
		m.mu.Lock()
		defer m.mu.Unlock()
		assert.Same(t, st, m.requests[st.req.Key], "its outcome is still recorded, and Forget still withdraws it")
	}
	t.Run("keeps tracking a request its moving target handed to its new worker meanwhile", func(t *testing.T) {
		m, st, w := tracked(t)
		m.mu.Lock()
		st.handedTo = &worker{} // rehomed: in the queue of the target's new branch
		m.mu.Unlock()
		out, err := m.handedOver(st, w, false)
		require.NoError(t, err)
		assert.False(t, out.Done)
		stillTracked(t, m, st)
	})
	t.Run("keeps tracking a request marked to follow its moving target", func(t *testing.T) {
		m, st, w := tracked(t)
		m.mu.Lock()
		st.rehome = true
		m.mu.Unlock()
		_, err := m.handedOver(st, w, false)
		require.NoError(t, err)
		stillTracked(t, m, st)
	})
	t.Run("lets a request no queue took and nothing moves wait for its target's registration", func(t *testing.T) {
		m, st, w := tracked(t)
		_, err := m.handedOver(st, w, false)
		require.ErrorIs(t, err, ErrTargetNotRegistered)
		m.mu.Lock()
		defer m.mu.Unlock()
		assert.NotContains(t, m.requests, st.req.Key, "its controller hands it over again")
	})
	t.Run("takes a request its target's suspension settled meanwhile back out of the queue it reached", func(t *testing.T) {
		m, st, w := tracked(t)
		m.mu.Lock()
		st.outcome = RequestOutcome{Done: true, Reason: ReasonTargetRemoved, Message: "suspended"}
		m.mu.Unlock()
		require.True(t, w.request(&st.req), "the target registered again on the same worker")
		out, err := m.handedOver(st, w, true)
		require.NoError(t, err)
		assert.Equal(t, ReasonTargetRemoved, out.Reason)
		w.qmu.Lock()
		defer w.qmu.Unlock()
		assert.Empty(t, w.queues[liveKey].waiting["alice"], "its message is not used after all")
	})
}

func TestARequestWhoseChangesSomeoneElseTookOverSaysSo(t *testing.T) {
	key, obj := clusterConfigMap("a", "new")
	m, _ := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"}, Options{Resolver: fixedResolver{key: obj}})
	w := m.workerOf(liveKey)
	m.Submit(Change{Target: liveKey, Key: key, Author: "alice"})
	r := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, UID: "1", Target: liveKey,
		Author: "alice", Message: "release", Deadline: time.Now().Add(time.Minute)}
	_, err := m.Request(r)
	require.NoError(t, err)
	m.Submit(Change{Target: liveKey, Key: key, Author: "bob"}) // before alice's window commits

	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	out, err := m.Request(r)
	require.NoError(t, err)
	require.True(t, out.Done)
	assert.Equal(t, ReasonNothingToCommit, out.Reason)
	assert.Contains(t, out.Message, "someone changed the same objects after alice", "not that her changes left the folder as it was")
}

func TestWhenAWriterLeads(t *testing.T) {
	now := time.Now()
	t.Run("takes a request handed over before the writer starts leading as made before it: a standby's process started long before", func(t *testing.T) {
		m := NewManager(Options{GitTimeout: time.Minute})
		created := now.Add(-time.Second)
		assert.Equal(t, now, m.leadingSince(now))
		assert.True(t, m.recovering(created, now), "an earlier leader may have committed it")
	})
	t.Run("counts from when the writer started leading", func(t *testing.T) {
		m := NewManager(Options{GitTimeout: time.Minute})
		m.started = now
		assert.False(t, m.recovering(now.Add(time.Second), now.Add(2*time.Second)), "made while this replica led")
		assert.True(t, m.recovering(now.Add(-time.Second), now.Add(time.Minute)))
		assert.False(t, m.recovering(now.Add(-time.Second), now.Add(2*time.Minute)), "two Git timeouts after it started leading")
	})
}

func TestSettlingCommitRequests(t *testing.T) {
	key := types.NamespacedName{Namespace: "ops", Name: "release"}
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	done := RequestOutcome{Done: true, Reason: ReasonCommitted, SHA: "abc"}
	newManager := func() (*Manager, *int) {
		calls := 0
		return NewManager(Options{OnRequest: func(types.NamespacedName) { calls++ }}), &calls
	}
	t.Run("ignores an answer for a deleted request that reaches a new one of the same name", func(t *testing.T) {
		m, calls := newManager()
		deleted := &CommitRequest{Key: key, Target: target, Message: "old"}
		m.requests[key] = &requestState{req: CommitRequest{Key: key, Target: target, Message: "new"}}
		m.settle(deleted, done)
		assert.False(t, m.requests[key].outcome.Done)
		assert.Zero(t, *calls)
		m.settle(&m.requests[key].req, done)
		assert.Equal(t, done, m.requests[key].outcome)
		assert.Equal(t, 1, *calls)
	})
	t.Run("tells the controller only what changed", func(t *testing.T) {
		m, calls := newManager()
		m.requests[key] = &requestState{req: CommitRequest{Key: key, Target: target}}
		retrying := RequestOutcome{Reason: ReasonRetrying, Message: "the remote is down"}
		m.settle(&m.requests[key].req, retrying)
		m.settle(&m.requests[key].req, retrying)
		assert.Equal(t, 1, *calls)
	})
	t.Run("does not hand a request its old worker committed while the target moved to the new worker", func(t *testing.T) {
		m, _ := newManager()
		m.requests[key] = &requestState{req: CommitRequest{Key: key, Target: target, Author: "alice"}, outcome: done, rehome: true}
		w := newWorker(workerKey{}, nil, m.opts, m.settle)
		w.queues[target] = newQueue()
		m.unpark(target, w)
		assert.Empty(t, w.queues[target].waiting, "its message was used already")
		assert.False(t, m.requests[key].rehome)
	})
	t.Run("hands a moved request past its deadline to the window of its author's kept changes, not to a timeout", func(t *testing.T) {
		m, _ := newManager()
		m.requests[key] = &requestState{req: CommitRequest{Key: key, Target: target, Author: "alice", Deadline: time.Now().Add(-time.Second)},
			outcome: RequestOutcome{Reason: ReasonRetrying}, rehome: true}
		m.parked[target] = map[ObjectKey]Change{goneKey: {Target: target, Key: goneKey, Deleted: true, Author: "alice"}}
		w := newWorker(workerKey{}, nil, m.opts, m.settle)
		w.queues[target] = newQueue()
		m.unpark(target, w)
		q := w.queues[target]
		timedOut, _ := q.expired(time.Now(), true)
		assert.Empty(t, timedOut, "her change arrived with it")
		require.NotNil(t, q.windows["alice"])
		assert.Equal(t, []*CommitRequest{&m.requests[key].req}, q.windows["alice"].requests)
	})
}

// fixedResolver answers with a copy of the object it holds for a key, and nil (deleted) for
// any other.
type fixedResolver map[ObjectKey]*unstructured.Unstructured

func (r fixedResolver) Current(_ types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	if o := r[k]; o != nil {
		return o.DeepCopy(), nil
	}
	return nil, nil
}

// clusterConfigMap is ConfigMap app/name in the cluster, data.k set to v, and its key.
func clusterConfigMap(name, v string) (ObjectKey, *unstructured.Unstructured) {
	return ObjectKey{GVR: goneKey.GVR, Kind: "ConfigMap", Namespace: "app", Name: name},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "app"}, "data": map[string]any{"k": v}}}
}

// filesAtTip reads the files under folder at the worker's remote tip, by path.
func filesAtTip(t *testing.T, w *worker, folder string) map[string]string {
	t.Helper()
	files, err := w.repo.ReadTree(w.remoteTip, folder)
	require.NoError(t, err)
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = string(f.Content)
	}
	return got
}

// configMapDoc is the document of ConfigMap app/name with data.k set to v.
func configMapDoc(name, v string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: app\ndata:\n  k: " + v + "\n"
}

func TestAFolderThatBecomesWritableAsksForItsSnapshot(t *testing.T) {
	t.Run("asks even when another target's fetch re-read the folder first", func(t *testing.T) {
		remote := repotest.NewFileRemote(t)
		remote.Seed("main", map[string]string{"a/README.md": "x\n", "b/kustomization.yaml": "resources: []\n"}, "seed")
		var mu sync.Mutex
		var ready []types.NamespacedName
		msgs, err := ParseMessages("", "")
		require.NoError(t, err)
		m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), OnFolderReady: func(k types.NamespacedName) {
			mu.Lock()
			defer mu.Unlock()
			ready = append(ready, k)
		}})
		spec := func(name string) TargetSpec {
			return TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: name}, URL: remote.URL, Branch: "main", Folder: name,
				Messages: msgs, Window: WindowConfig{Quiet: time.Hour}, Committer: Identity{Name: "W", Email: "w@example.com"}}
		}
		a, b := spec("a"), spec("b")
		_, err = m.EnsureTarget(context.Background(), a)
		require.NoError(t, err)
		st, err := m.EnsureTarget(context.Background(), b)
		require.NoError(t, err)
		require.False(t, st.Verdict.Supported, "b's kustomization.yaml lists no file of the writer: not writable")

		c := remote.Clone("main")
		c.Git("rm", "-q", "b/kustomization.yaml")
		c.WriteFile("b/README.md", "fixed\n")
		c.CommitAndPush("main", "fix b")
		w := m.workerOf(a.Key)
		w.mu.Lock()
		w.lastFetch = time.Time{} // a's registration fetches first and re-reads b's folder
		w.mu.Unlock()
		_, err = m.EnsureTarget(context.Background(), a)
		require.NoError(t, err)
		st, err = m.EnsureTarget(context.Background(), b)
		require.NoError(t, err)
		require.True(t, st.Verdict.Supported)

		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []types.NamespacedName{a.Key, b.Key}, ready, "a's first snapshot, then b's once it was fixed")
	})
}

func TestACommitIsPlannedFromAnIndexOfTheTip(t *testing.T) {
	t.Run("re-reads a folder whose index a failed re-read left behind before writing an object a person moved", func(t *testing.T) {
		key, live := clusterConfigMap("a", "new")
		remote := repotest.NewFileRemote(t)
		remote.Seed("main", map[string]string{"live/app/pair.yaml": configMapDoc("a", "old") + "---\n" + configMapDoc("b", "old")}, "seed")
		msgs, err := ParseMessages("", "")
		require.NoError(t, err)
		m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), Resolver: fixedResolver{key: live}})
		spec := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
			Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}, Committer: Identity{Name: "W", Email: "w@example.com"}}
		_, err = m.EnsureTarget(context.Background(), spec)
		require.NoError(t, err)

		c := remote.Clone("main")
		c.WriteFile("live/app/pair.yaml", configMapDoc("b", "old"))
		c.WriteFile("live/app/moved.yaml", configMapDoc("a", "old"))
		c.CommitAndPush("main", "move a into its own file")
		w := m.workerOf(liveKey)
		w.mu.Lock()
		// What a fetch whose re-read of this folder failed leaves: the tip moved, the index not.
		tip, err := w.repo.Fetch(context.Background(), "main")
		require.NoError(t, err)
		w.remoteTip = tip
		w.mu.Unlock()

		m.Submit(Change{Target: liveKey, Key: key})
		_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
		require.NoError(t, err)

		show := func(path string) string { return remote.Show("main", path) + "\n" } // Show drops the last line break
		assert.Equal(t, configMapDoc("b", "old"), show("live/app/pair.yaml"))
		assert.Equal(t, configMapDoc("a", "new"), show("live/app/moved.yaml"))
	})
}

func TestARemoteThatStopsAnsweringFailsTheAttemptWithinTheGitTimeout(t *testing.T) {
	// A server that accepts connections and never answers: what a hung proxy or
	// receive-pack looks like from here.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), GitTimeout: 300 * time.Millisecond})
	spec := TargetSpec{Key: liveKey, URL: "http://" + l.Addr().String() + "/repo.git", Branch: "main", Folder: "live", Messages: msgs,
		Committer: Identity{Name: "W", Email: "w@example.com"}}

	start := time.Now()
	_, err = m.EnsureTarget(context.Background(), spec)

	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Contains(t, err.Error(), "fetching branch main")
}

// damagedCloneScene registers ops/live on a remote seeded with seed, turns the blob of
// garbled to garbage in the worker's clone (a disk fault, or a write a power loss cut short),
// opens the clone again as a new process would (its check at start reads trees, not blobs),
// and starts the writer. ConfigMap app/a is "new" in the cluster.
func damagedCloneScene(t *testing.T, seed map[string]string, garbled string, opts Options) (*Manager, *repotest.Remote, *worker, ObjectKey) {
	t.Helper()
	key, live := clusterConfigMap("a", "new")
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", seed, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	opts.Log, opts.WorkDir, opts.Resolver = testr.New(t), t.TempDir(), fixedResolver{key: live}
	m := NewManager(opts)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	// The worker stops before the work dir is removed, which it may still be repairing.
	t.Cleanup(func() { cancel(); <-stopped })
	spec := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Committer: Identity{Name: "W", Email: "w@example.com"}}
	_, err = m.EnsureTarget(ctx, spec)
	require.NoError(t, err)
	w := m.workerOf(liveKey)
	w.mu.Lock()
	repotest.DamageObject(t, w.repo.Dir(), "main", garbled, []byte("x\x9c garbage"))
	reopened, err := repo.Open(ctx, w.repo.Dir(), remote.URL, nil)
	require.NoError(t, err)
	require.NoError(t, reopened.RepairedDamage())
	reopened.SetCompactionThresholds(m.opts.compactLooseObjects(), m.opts.compactPacks())
	w.repo = reopened
	w.mu.Unlock()
	go func() { _ = m.Start(ctx); close(stopped) }()
	return m, remote, w, key
}

func TestAWriterRebuildsAClonePartOfWhichCannotBeRead(t *testing.T) {
	t.Run("rebuilds it from the remote and commits the change that could not read its file", func(t *testing.T) {
		m, remote, _, key := damagedCloneScene(t, map[string]string{"live/app/a.yaml": "# kept\n" + configMapDoc("a", "old")},
			"live/app/a.yaml", Options{})

		m.Submit(Change{Target: liveKey, Key: key})

		require.Eventually(t, func() bool { return strings.Contains(remote.Show("main", "live/app/a.yaml"), "k: new") },
			20*time.Second, 50*time.Millisecond, "the change is committed once the clone is rebuilt")
		assert.Equal(t, "# kept\n"+configMapDoc("a", "new"), remote.Show("main", "live/app/a.yaml")+"\n", "edited in place")
		remote.Fsck()
	})
}

func TestACloneWhoseCompactionFindsAGarbledBlobOutsideEveryFolderIsRebuilt(t *testing.T) {
	// A blob no target reads is garbled.
	m, remote, w, key := damagedCloneScene(t, map[string]string{"live/app/a.yaml": configMapDoc("a", "old"), "docs/notes.md": "notes\n"},
		"docs/notes.md", Options{CompactLooseObjects: 1})

	m.Submit(Change{Target: liveKey, Key: key}) // its push makes the clone due for compaction
	require.Eventually(t, func() bool { return strings.Contains(remote.Show("main", "live/app/a.yaml"), "k: new") },
		20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.repo.Verify() == nil
	}, 20*time.Second, 50*time.Millisecond, "the compaction that could not read the blob had the clone rebuilt")
}

// twoConfigMaps registers ops/live on a folder holding ConfigMap app/a at "old", over a
// cluster where app/a and app/b are "new", and returns its worker and their keys.
func twoConfigMaps(t *testing.T) (m *Manager, w *worker, keyA, keyB ObjectKey) {
	t.Helper()
	keyA, a := clusterConfigMap("a", "new")
	keyB, b := clusterConfigMap("b", "new")
	m, _ = registeredManagerWith(t, map[string]string{"live/app/configmaps/a.yaml": configMapDoc("a", "old")},
		Options{Resolver: fixedResolver{keyA: a, keyB: b}})
	return m, m.workerOf(liveKey), keyA, keyB
}

func TestACreateOnlyChangeWritesOnlyADocumentGitLacks(t *testing.T) {
	m, w, keyA, keyB := twoConfigMaps(t)
	remote := w.key.url

	m.Submit(Change{Target: liveKey, Key: keyA, CreateOnly: true}, Change{Target: liveKey, Key: keyB, CreateOnly: true})
	_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)

	got := filesAtTip(t, w, "live")
	assert.Equal(t, map[string]string{
		"live/app/configmaps/a.yaml": configMapDoc("a", "old"),
		"live/app/configmaps/b.yaml": configMapDoc("b", "new"),
	}, got, "a's document stays as it was in %s; b's is created", remote)
}

func TestATargetMovedToAnotherFolderWhileTheRemoteIsDownWritesOnlyToTheNewFolder(t *testing.T) {
	key, live := clusterConfigMap("a", "new")
	m, spec := registeredManagerWith(t, map[string]string{"live/app/configmaps/a.yaml": configMapDoc("a", "old")},
		Options{Resolver: fixedResolver{key: live}})
	w := m.workerOf(liveKey)
	remoteDir := strings.TrimPrefix(w.repo.URL(), "file://")
	require.NoError(t, os.Rename(remoteDir, remoteDir+".away")) // the remote is unreachable
	spec.Folder = "moved"
	w.mu.Lock()
	w.lastFetch = time.Time{}
	w.mu.Unlock()
	_, err := m.EnsureTarget(context.Background(), spec)
	require.Error(t, err, "the fetch that would re-read the folder fails")
	at := m.Locate(liveKey, key.GVR, "ConfigMap", "app", "a")
	assert.Equal(t, "moved/app/configmaps/a.yaml", at.Path, "admission names the new folder too")
	assert.Empty(t, at.Problem)
	require.NoError(t, os.Rename(remoteDir+".away", remoteDir))

	m.Submit(Change{Target: liveKey, Key: key})
	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)

	got := filesAtTip(t, w, "")
	assert.Equal(t, map[string]string{
		"live/app/configmaps/a.yaml":  configMapDoc("a", "old"),
		"moved/app/configmaps/a.yaml": configMapDoc("a", "new"),
	}, got, "the folder the target left stays as it was")
}

// notSelected answers ErrNotSelected for every object: it exists, but no rule selects it.
type notSelected struct{}

func (notSelected) Current(types.NamespacedName, ObjectKey) (*unstructured.Unstructured, error) {
	return nil, ErrNotSelected
}

func TestAnObjectNoRuleSelectsAnyMore(t *testing.T) {
	doc := map[string]string{"live/app/configmaps/a.yaml": configMapDoc("a", "old")}
	key, _ := clusterConfigMap("a", "old")
	tests := []struct {
		name     string
		resolver Resolver
		change   Change
		kept     bool
	}{
		{name: "keeps the document of an object whose rule was deleted while its update waited",
			resolver: notSelected{}, change: Change{Target: liveKey, Key: key}, kept: true},
		{name: "removes the document of an object that left the selection of a rule mirroring that",
			resolver: notSelected{}, change: Change{Target: liveKey, Key: key, Deleted: true}},
		// Its rule mirrored deletes when the update came, was narrowed, and then the object
		// was deleted: no rule mirrored that delete, so no removal came.
		{name: "keeps the document of an object deleted after its rule was narrowed while its update waited",
			resolver: fixedResolver{}, change: Change{Target: liveKey, Key: key}, kept: true},
		{name: "removes the document of an object whose delete was seen",
			resolver: fixedResolver{}, change: Change{Target: liveKey, Key: key, Deleted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := registeredManagerWith(t, doc, Options{Resolver: tt.resolver})
			w := m.workerOf(liveKey)
			m.Submit(tt.change)
			_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
			require.NoError(t, err)
			_, kept := filesAtTip(t, w, "live")["live/app/configmaps/a.yaml"]
			assert.Equal(t, tt.kept, kept)
		})
	}
}

func TestPlanBefore(t *testing.T) {
	v1, beta := goneKey, goneKey
	beta.GVR.Version = "v1beta1"
	other := goneKey
	other.Name = "another"
	tests := []struct {
		name     string
		a, b     ObjectKey
		dirty    map[ObjectKey]intent
		resolved map[ObjectKey]resolution
		want     bool
	}{
		{"orders objects by identity", other, v1, map[ObjectKey]intent{}, nil, true},
		{"plans the write of an object waiting at two versions before its removal",
			v1, beta, map[ObjectKey]intent{v1: {}, beta: {deleted: true}}, nil, true},
		{"plans its removal after the write, whichever version each came at",
			v1, beta, map[ObjectKey]intent{v1: {deleted: true}, beta: {}}, nil, false},
		{"orders two writes of one object by version", v1, beta, map[ObjectKey]intent{}, nil, true},
		{"plans first the version the cluster has the object at, though both saw it deleted",
			v1, beta, map[ObjectKey]intent{v1: {deleted: true}, beta: {deleted: true}},
			map[ObjectKey]resolution{v1: {err: ErrNotSelected}, beta: {obj: &unstructured.Unstructured{}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, planBefore(tt.a, tt.b, tt.dirty, PruneOnEvent, tt.resolved))
		})
	}
}

// byVersion answers per version of a resource: rules at v1 and at v1beta1 re-resolving one
// by one after a CRD's preferred version moved.
type byVersion map[string]*unstructured.Unstructured

func (r byVersion) Current(_ types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	if o := r[k.GVR.Version]; o != nil {
		return o.DeepCopy(), nil
	}
	return nil, ErrNotSelected
}

// twoVersionsOf registers target live with a person's file holding objects a and b
// (personsFile) and returns a's keys at v1 and at v1beta1 of its resource, the cluster read
// through r: rules at both versions re-resolving one by one after a CRD's preferred version
// moved.
func twoVersionsOf(t *testing.T, r Resolver) (m *Manager, v1, beta ObjectKey) {
	t.Helper()
	v1, _ = clusterConfigMap("a", "new")
	beta = v1
	beta.GVR.Version = "v1beta1"
	m, _ = registeredManagerWith(t, map[string]string{"live/app/all.yaml": personsFile("old")}, Options{Resolver: r})
	return m, v1, beta
}

// personsFile is a person's file of two objects, a (whose data k is a) and b.
func personsFile(a string) string {
	return configMapDoc("a", a) + "---\n" + configMapDoc("b", "x")
}

func TestAnObjectAtTwoVersionsKeepsItsDocument(t *testing.T) {
	_, obj := clusterConfigMap("a", "new")
	for _, tt := range []struct {
		name        string
		betaDeleted bool
	}{
		{"when one version's rule let it go and the other's still selects it", false},
		// Both versions' informers saw the delete, and only the one sorting last has seen
		// the object created again.
		{"when it was deleted at both versions and created again within the window", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, v1, beta := twoVersionsOf(t, byVersion{"v1beta1": obj})
			m.Submit(Change{Target: liveKey, Key: v1, Deleted: true}, Change{Target: liveKey, Key: beta, Deleted: tt.betaDeleted})
			w := m.workerOf(liveKey)
			_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
			require.NoError(t, err)
			files := filesAtTip(t, w, "live")
			assert.Equal(t, personsFile("new"), files["live/app/all.yaml"], "updated where it is")
			assert.NotContains(t, files, "live/app/configmaps/a.yaml", "not moved out of the person's file")
		})
	}
}

// The version that saw the object leave its rule waits for its cache while the other
// version's rule writes the object: its removal does not come back in a later window.
func TestARemovalWaitingForItsCacheDoesNotOutliveTheWriteOfTheSameObject(t *testing.T) {
	_, obj := clusterConfigMap("a", "new")
	syncing := map[string]bool{"v1": true}
	m, v1, beta := twoVersionsOf(t, byVersionSyncing{byVersion: byVersion{"v1beta1": obj}, syncing: syncing})
	m.Submit(Change{Target: liveKey, Key: v1, Deleted: true}, Change{Target: liveKey, Key: beta})
	w := m.workerOf(liveKey)
	_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, personsFile("new"), filesAtTip(t, w, "live")["live/app/all.yaml"], "updated where it is")

	w.mu.Lock()
	delete(syncing, "v1") // the v1 informer has synced
	w.mu.Unlock()
	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, personsFile("new"), filesAtTip(t, w, "live")["live/app/all.yaml"], "the object exists: its document stays")
	assert.Zero(t, m.pendingOf(liveKey))
}

// byVersionSyncing is byVersion where the versions in syncing wait for their cache.
type byVersionSyncing struct {
	byVersion
	syncing map[string]bool
}

func (r byVersionSyncing) Current(target types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	if r.syncing[k.GVR.Version] {
		return nil, ErrNotSynced
	}
	return r.byVersion.Current(target, k)
}

func TestAnObjectWhoseOtherVersionWaitsForItsCacheIsNotRemovedMeanwhile(t *testing.T) {
	m, v1, beta := twoVersionsOf(t, byVersionSyncing{byVersion: byVersion{}, syncing: map[string]bool{"v1beta1": true}})
	both := personsFile("old")
	m.Submit(Change{Target: liveKey, Key: v1, Deleted: true}, // it left the v1 rule's selection
		Change{Target: liveKey, Key: beta}) // the v1beta1 rule's informer, just started, has not synced
	w := m.workerOf(liveKey)
	_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, both, filesAtTip(t, w, "live")["live/app/all.yaml"], "left until the other version can tell")
	assert.Equal(t, 2, m.pendingOf(liveKey), "both wait")
}

// readyRecorder records the targets whose folder asked for a snapshot (OnFolderReady).
type readyRecorder struct {
	mu    sync.Mutex
	ready []types.NamespacedName
}

func (r *readyRecorder) add(k types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready = append(r.ready, k)
}

func (r *readyRecorder) got() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ready)
}

// snapshotAskingTarget is GitTarget ops/live registered on main of a remote seeded with
// seed, whose cluster holds ConfigMap app/a ("new"); it returns the change of a.
func snapshotAskingTarget(t *testing.T, seed map[string]string) (*Manager, *repotest.Remote, *readyRecorder, Change) {
	t.Helper()
	key, live := clusterConfigMap("a", "new")
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", seed, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	rec := &readyRecorder{}
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), Resolver: fixedResolver{key: live}, OnFolderReady: rec.add})
	spec := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}, Committer: Identity{Name: "W", Email: "w@example.com"}}
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	return m, remote, rec, Change{Target: liveKey, Key: key}
}

func TestABranchSomeoneDeletedIsWrittenWholeAgain(t *testing.T) {
	t.Run("asks for a snapshot of each folder on the branch once its next commit finds the branch gone", func(t *testing.T) {
		m, remote, rec, change := snapshotAskingTarget(t, map[string]string{"live/README.md": "objects\n"})
		repotest.Git(t, remote.Dir, "update-ref", "-d", "refs/heads/main")

		m.Submit(change)
		w := m.workerOf(liveKey)
		_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
		require.NoError(t, err)

		require.Len(t, remote.Log("main"), 1, "the window is written at once, on a new branch")
		files := filesAtTip(t, w, "live")
		assert.NotContains(t, files, "live/README.md")
		assert.Len(t, files, 1)
		assert.Equal(t, []types.NamespacedName{liveKey, liveKey}, rec.got(), "then a snapshot writes the rest of the folder")
	})
	t.Run("asks too when the commit that finds the branch gone first rebuilt a damaged clone", func(t *testing.T) {
		m, remote, rec, change := snapshotAskingTarget(t, map[string]string{"live/app/a.yaml": configMapDoc("a", "old"), "live/app/b.yaml": configMapDoc("b", "old")})
		w := m.workerOf(liveKey)
		w.mu.Lock()
		// The file's blob turns to garbage on disk; a new process opens the clone, whose
		// check at start reads trees, not blobs.
		repotest.DamageObject(t, w.repo.Dir(), "main", "live/app/a.yaml", []byte("x\x9c garbage"))
		reopened, err := repo.Open(context.Background(), w.repo.Dir(), remote.URL, nil)
		require.NoError(t, err)
		w.repo = reopened
		w.mu.Unlock()
		repotest.Git(t, remote.Dir, "update-ref", "-d", "refs/heads/main")

		m.Submit(change)
		_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
		require.Error(t, err, "the damaged file fails the first attempt, and the clone is rebuilt")
		_, err = w.flushIfDue(context.Background(), liveKey, 3*time.Hour)
		require.NoError(t, err)

		require.Len(t, remote.Log("main"), 1, "the window is written on a new branch")
		assert.Equal(t, []types.NamespacedName{liveKey, liveKey}, rec.got(), "and a snapshot writes the rest of the folder")
	})
}

func TestAPruneWaitingForItsCommitFollowsTheModeAndTheListsAsTheyAreThen(t *testing.T) {
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n"
	pruning := Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true },
		Prunable: func(string, map[string]string) bool { return true }}
	cases := []struct {
		name string
		then func(t *testing.T, m *Manager, spec TargetSpec)
		kept bool
	}{
		{name: "removes the document when nothing changed before the commit", then: func(*testing.T, *Manager, TargetSpec) {}},
		{name: "keeps the document when the target switched to OnEvent meanwhile", kept: true,
			then: func(t *testing.T, m *Manager, spec TargetSpec) {
				spec.Prune = PruneOnEvent
				_, err := m.EnsureTarget(context.Background(), spec)
				require.NoError(t, err)
			}},
		{name: "keeps the document when a later list no longer prunes it (its rule lost DELETE)", kept: true,
			then: func(_ *testing.T, m *Manager, _ TargetSpec) {
				keeping := pruning
				keeping.Prunable = nil
				m.Snapshot(keeping)
			}},
		{name: "keeps the document when a later list no longer covers its namespace (a selector narrowed)", kept: true,
			then: func(_ *testing.T, m *Manager, _ TargetSpec) {
				m.Snapshot(Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", Complete: true,
					InScope: func(ns string) bool { return ns != "app" }, Prunable: func(string, map[string]string) bool { return true }})
			}},
		{name: "keeps the document when a list at the resource's new version no longer prunes it", kept: true,
			then: func(_ *testing.T, m *Manager, _ TargetSpec) {
				keeping := pruning
				keeping.GVR.Version, keeping.Prunable = "v2", nil
				m.Watched(liveKey, []schema.GroupVersionResource{keeping.GVR}) // every rule moved to v2
				m.Snapshot(keeping)
			}},
		{name: "removes the document when a list at another version the target still watches does not cover it",
			then: func(_ *testing.T, m *Manager, _ TargetSpec) {
				other := pruning
				other.GVR.Version, other.Prunable = "v2", nil
				other.InScope = func(ns string) bool { return ns == "elsewhere" } // a rule not moved to v1 yet
				m.Watched(liveKey, []schema.GroupVersionResource{pruning.GVR, other.GVR})
				m.Snapshot(other)
			}},
		{name: "removes the document when a delete of the object was seen too, whatever the mode became",
			then: func(t *testing.T, m *Manager, spec TargetSpec) {
				m.Submit(Change{Target: liveKey, Key: ObjectKey{GVR: goneKey.GVR, Kind: "ConfigMap", Namespace: "app", Name: "a"}, Deleted: true})
				spec.Prune = PruneOnEvent
				_, err := m.EnsureTarget(context.Background(), spec)
				require.NoError(t, err)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, spec := registeredManagerWith(t, map[string]string{"live/app/configmaps/a.yaml": doc}, Options{Resolver: fixedResolver{}})
			spec.Prune = PruneAlways
			_, err := m.EnsureTarget(context.Background(), spec)
			require.NoError(t, err)
			m.Snapshot(pruning)
			require.Equal(t, 1, m.pendingOf(liveKey), "a's removal waits in a window")

			tc.then(t, m, spec)
			w := m.workerOf(liveKey)
			_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
			require.NoError(t, err)
			_, present := filesAtTip(t, w, "live")["live/app/configmaps/a.yaml"]
			assert.Equal(t, tc.kept, present)
		})
	}
}

// unregisteredManager is a writer (objects resolving to none) and a remote whose folder live
// holds ConfigMap app/a, with the spec of a target on it, not registered yet.
func unregisteredManager(t *testing.T) (*Manager, *repotest.Remote, TargetSpec) {
	t.Helper()
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"live/app/configmaps/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n"}, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), Resolver: fixedResolver{}})
	return m, remote, TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}, Committer: Identity{Name: "W", Email: "w@example.com"}}
}

func TestADeleteSeenBeforeItsTargetRegistersIsWrittenOnceItDoes(t *testing.T) {
	m, remote, spec := unregisteredManager(t)
	a := ObjectKey{GVR: goneKey.GVR, Kind: "ConfigMap", Namespace: "app", Name: "a"}
	// A new leader's informer delivers the delete before the GitTarget's first reconcile.
	m.Submit(Change{Target: liveKey, Key: a, Deleted: true, Author: "alice"},
		Change{Target: liveKey, Key: ObjectKey{GVR: goneKey.GVR, Kind: "ConfigMap", Namespace: "app", Name: "b"}})

	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	// Its initial snapshot lists no a: under OnEvent, an orphan alone would be kept.
	m.Snapshot(Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", InScope: func(string) bool { return true }})
	require.Equal(t, 2, m.pendingOf(liveKey), "the delete waits, and b, kept once the target kept a change")

	w := m.workerOf(liveKey)
	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	assert.NotContains(t, filesAtTip(t, w, "live"), "live/app/configmaps/a.yaml")
	assert.Contains(t, remote.Log("main")[0], "Delete ConfigMap app/a")
}

func TestAChangeWithAnAuthorSeenBeforeItsTargetRegistersKeepsItsAuthor(t *testing.T) {
	m, remote, spec := unregisteredManager(t)
	b, live := clusterConfigMap("b", "1")
	m.opts.Resolver = fixedResolver{b: live}
	// alice applies the GitTarget, its WatchRule and ConfigMap b at once: b's create event
	// (or the rule's first list, which found it as her create left it) arrives while the
	// target clones, and uses up her admission record.
	m.Submit(Change{Target: liveKey, Key: b, Author: "alice"})

	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	// Its initial snapshot lists b again, as no one's change.
	m.Submit(Change{Target: liveKey, Key: b, Relisted: true})
	m.Snapshot(Snapshot{Target: liveKey, GVR: goneKey.GVR, Kind: "ConfigMap", Present: []ObjectKey{b}, InScope: func(string) bool { return true }})

	w := m.workerOf(liveKey)
	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	assert.Contains(t, filesAtTip(t, w, "live"), "live/app/configmaps/b.yaml")
	assert.Equal(t, "alice", repotest.Git(t, remote.Dir, "log", "-1", "--format=%an", "refs/heads/main"), "hers, not the committer's")
}

func TestADeleteOfAGitTargetJustDeletedIsNotKeptForIt(t *testing.T) {
	m, spec := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
	a := ObjectKey{GVR: goneKey.GVR, Kind: "ConfigMap", Namespace: "app", Name: "a"}
	m.RemoveTarget(liveKey)
	m.Submit(Change{Target: liveKey, Key: a, Deleted: true}) // its rule has not noticed yet
	assert.Nil(t, m.parked[liveKey], "it will never register: nothing is kept, in memory or in the journal")

	_, err := m.EnsureTarget(context.Background(), spec) // created again under its name
	require.NoError(t, err)
	m.SuspendTarget(liveKey, "its GitProvider is gone")
	m.RemoveTarget(liveKey)
	m.KeepChanges(liveKey) // a new one on another leader, in its credentials' grace period
	m.Submit(Change{Target: liveKey, Key: a, Deleted: true})
	assert.Len(t, m.parked[liveKey], 1, "a target the controller says exists keeps it")
}

func TestACommitOutsideTheFolderDoesNotReadTheFolderAgain(t *testing.T) {
	m, remote, spec := unregisteredManager(t)
	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	w := m.workerOf(liveKey)
	refresh := func() (*folderIndex, layout.Verdict) {
		t.Helper()
		w.mu.Lock()
		defer w.mu.Unlock()
		require.NoError(t, w.refresh(context.Background(), false, nil))
		tg := w.targets[liveKey]
		require.Equal(t, w.remoteTip, tg.index.Load().describes(), "the index describes the new tip")
		return tg.index.Load(), tg.verdict
	}
	before, _ := refresh()

	remote.PushFiles("main", map[string]string{"docs/README.md": "elsewhere\n"}, "a person writes outside the folder")
	after, verdict := refresh()
	assert.Same(t, before, after, "the folder's tree is the same: its files are not read again")
	assert.True(t, verdict.Supported)

	remote.PushFiles("main", map[string]string{"apps/kustomization.yaml": "resources:\n- ../live/app\n"}, "a Kustomization elsewhere reaches into it")
	after, verdict = refresh()
	assert.False(t, verdict.Supported, "judged again from outside: %s", verdict.Reason)
	assert.Zero(t, after.len(), "as a full analysis leaves it")

	remote.PushFiles("main", map[string]string{"apps/kustomization.yaml": "resources: []\n"}, "fixed")
	after, verdict = refresh()
	assert.True(t, verdict.Supported)
	assert.Equal(t, 1, after.len(), "read again in full once it is supported again")

	remote.PushFiles("main", map[string]string{"live/app/configmaps/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: app\n"}, "a person writes in the folder")
	again, _ := refresh()
	assert.NotSame(t, after, again)
	assert.Equal(t, 2, again.len())
}

// A fetch or another target's push may hold the worker's lock for seconds: a window whose
// quiet period ends meanwhile commits once the lock is free, judged by the time then.
func TestAWindowDueWhileTheWorkerWaitsForItsLockCommitsOnceItHasIt(t *testing.T) {
	key, live := clusterConfigMap("a", "new")
	m, _ := registeredManagerWith(t, map[string]string{"live/app/configmaps/a.yaml": configMapDoc("a", "old")},
		Options{Resolver: fixedResolver{key: live}})
	w := m.workerOf(liveKey)
	m.Submit(Change{Target: liveKey, Key: key})

	w.mu.Lock()
	held := time.Now()
	done := make(chan error, 1)
	go func() {
		// Asked 500 ms before the window's quiet hour ends; the lock is free 1.5 s later.
		_, err := w.flushIfDue(context.Background(), liveKey, time.Hour-500*time.Millisecond)
		done <- err
	}()
	time.Sleep(1500*time.Millisecond - time.Since(held))
	w.mu.Unlock()
	require.NoError(t, <-done)

	assert.Equal(t, configMapDoc("a", "new"), filesAtTip(t, w, "live")["live/app/configmaps/a.yaml"])
}

func TestARequestOnAWindowHeldBackByTheTargetsBackoffSaysItWaitsForTheRetry(t *testing.T) {
	m, w, keyA, keyB := twoConfigMaps(t)
	remoteDir := strings.TrimPrefix(w.repo.URL(), "file://")
	require.NoError(t, os.Rename(remoteDir, remoteDir+".away")) // the remote is unreachable
	m.Submit(Change{Target: liveKey, Key: keyA, Author: "alice"})
	_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.Error(t, err, "alice's push fails: the target backs off")
	w.mu.Lock()
	w.targets[liveKey].retryAt = time.Now().Add(time.Minute) // as after a few failures: a slow machine cannot outlast it
	w.mu.Unlock()

	m.Submit(Change{Target: liveKey, Key: keyB, Author: "bob"})
	req := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "bobs"}, Target: liveKey, Author: "bob",
		Message: "bob's release", Deadline: time.Now().Add(time.Minute)}
	_, err = m.Request(req)
	require.NoError(t, err)
	_, err = w.flushIfDue(context.Background(), liveKey, 0) // within the backoff: nothing is tried
	require.NoError(t, err)

	out, err := m.Request(req)
	require.NoError(t, err)
	assert.False(t, out.Done)
	assert.Equal(t, ReasonRetrying, out.Reason, "not waiting for a change of bob's: his change waits for the retry")
	assert.Contains(t, out.Message, remoteDir, "with the push's error")

	require.NoError(t, os.Rename(remoteDir+".away", remoteDir)) // back
	w.mu.Lock()
	w.targets[liveKey].retryAt = time.Time{}
	w.mu.Unlock()
	_, err = w.flushIfDue(context.Background(), liveKey, askedQuiet) // alice's window, retried, and bob's, which his request closed
	require.NoError(t, err)
	out, err = m.Request(req)
	require.NoError(t, err)
	assert.Equal(t, ReasonCommitted, out.Reason, "the retry carries bob's message: %s", out.Message)
}

// racingResolver serves one object; the first time it is read it takes a newer state and
// calls changed, as an informer does: its cache holds a write just before the write's event
// reaches the writer.
type racingResolver struct {
	mu         sync.Mutex
	obj, newer *unstructured.Unstructured
	changed    func()
	races      int
}

func (r *racingResolver) Current(types.NamespacedName, ObjectKey) (*unstructured.Unstructured, error) {
	r.mu.Lock()
	if r.newer != nil {
		r.obj, r.newer = r.newer, nil
		r.races++
		r.mu.Unlock()
		r.changed()
		r.mu.Lock()
	}
	defer r.mu.Unlock()
	return r.obj.DeepCopy(), nil
}

func TestAnObjectChangedByAnotherAuthorWhileAWindowIsPlannedGoesWithTheirChange(t *testing.T) {
	key, alices := clusterConfigMap("a", "alice's")
	_, bobs := clusterConfigMap("a", "bob's")
	r := &racingResolver{obj: alices, newer: bobs}
	m, _ := registeredManagerWith(t, map[string]string{"live/app/configmaps/a.yaml": configMapDoc("a", "old")}, Options{Resolver: r})
	r.changed = func() { m.Submit(Change{Target: liveKey, Key: key, Author: "bob"}) }
	w := m.workerOf(liveKey)
	m.Submit(Change{Target: liveKey, Key: key, Author: "alice"})
	alicesChange := time.Now()
	req := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "alices"}, Target: liveKey, Author: "alice",
		Message: "alice's release", Deadline: time.Now().Add(time.Minute)}
	_, err := m.Request(req)
	require.NoError(t, err)

	_, err = w.flushIfDue(context.Background(), liveKey, askedQuiet) // alice's window, closed by her request
	require.NoError(t, err)
	require.Equal(t, 1, r.races, "bob's write reached the cache while alice's window was planned")
	out, err := m.Request(req)
	require.NoError(t, err)
	assert.Equal(t, ReasonNothingToCommit, out.Reason, "bob changed it after her: his commit carries it")
	assert.Contains(t, out.Message, "someone changed the same objects after alice")
	w.qmu.Lock()
	bobsWindow := w.queues[liveKey].windows["bob"].First
	w.qmu.Unlock()
	assert.False(t, bobsWindow.After(alicesChange), "the object keeps its age in bob's window: maxDelay counts from alice's change")
	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour) // bob's window
	require.NoError(t, err)

	assert.Equal(t, configMapDoc("a", "bob's"), filesAtTip(t, w, "live")["live/app/configmaps/a.yaml"])
	log := repotest.Git(t, strings.TrimPrefix(w.repo.URL(), "file://"), "log", "--format=%an", "main")
	assert.Equal(t, "bob\nFixture Person", strings.TrimSpace(log), "one commit since the seed, bob's")
}

func TestATargetThatCanEncryptNowAsksForASnapshotOfWhatItRefused(t *testing.T) {
	m, _, rec, _ := snapshotAskingTarget(t, map[string]string{"live/README.md": "objects\n"})
	before := len(rec.got())
	w := m.workerOf(liveKey)
	w.mu.Lock()
	spec := w.targets[liveKey].spec
	w.mu.Unlock()
	_, public, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	recipients := encrypt.Recipients{public}
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	spec.Encryption = &Encryption{Recipients: recipients, DigestKey: key}
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	assert.Len(t, rec.got(), before+1, "the Secrets it refused are planned again, not left for their next change")
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	assert.Len(t, rec.got(), before+1, "once")
}

func TestDeletedTargetsAreRememberedOnlyForAWhile(t *testing.T) {
	m := NewManager(Options{})
	long := types.NamespacedName{Namespace: "previews", Name: "pr-1"}
	m.removed[long] = time.Now().Add(-removedMemory - time.Second)
	next := types.NamespacedName{Namespace: "previews", Name: "pr-2"}
	m.RemoveTarget(next)
	assert.NotContains(t, m.removed, long, "a target per pull request must not grow the map for ever")
	assert.Contains(t, m.removed, next)
}

// The GitTarget controller reconciles several targets at once (--concurrent): two that
// register together on a repository and branch no worker serves yet share one worker.
func TestTargetsRegisteringTogetherOnOneBranchShareOneWorker(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"a/README.md": "objects\n", "b/README.md": "objects\n"}, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), Resolver: fixedResolver{}})
	specs := make([]TargetSpec, 4)
	for i := range specs {
		specs[i] = TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: fmt.Sprintf("t%d", i)}, URL: remote.URL, Branch: "main",
			Folder: fmt.Sprintf("f%d", i), Messages: msgs, Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i := range specs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = m.EnsureTarget(context.Background(), specs[i]) }()
	}
	wg.Wait()

	for i := range specs {
		require.NoError(t, errs[i])
		assert.Same(t, m.workerOf(specs[0].Key), m.workerOf(specs[i].Key))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Len(t, m.workers, 1)
}

// A registration does not queue behind a fetch or push that stopped answering: it is
// refused once that has taken longer than slowRemote, and retried by its controller.
func TestARegistrationDoesNotWaitForARemoteThatStoppedAnswering(t *testing.T) {
	m, spec := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
	w := m.workerOf(liveKey)
	second := spec
	second.Key, second.Folder = types.NamespacedName{Namespace: "ops", Name: "second"}, "second"
	w.mu.Lock() // a fetch in progress, begun 11 s ago
	done := w.onRemote()
	started := time.Now().Add(-slowRemote - time.Second)
	w.remoteSince.Store(started.UnixNano())

	_, err := m.EnsureTarget(context.Background(), second)

	require.ErrorIs(t, err, ErrRemoteBusy)
	assert.Contains(t, err.Error(), "since "+started.UTC().Format(time.TimeOnly)+" UTC (branch main)",
		"when it began, which stays the same at every retry: the conditions quoting it are not rewritten each time")
	done()
	w.mu.Unlock()
	_, registered := m.Status(second.Key)
	assert.False(t, registered, "nothing of it changed: as if not called")
	_, err = m.EnsureTarget(context.Background(), second)
	assert.NoError(t, err, "the remote answers again")
}

// A registration waiting for its turn on the branch gives up while a fetch or push the
// registration holding the turn waits for has taken longer than slowRemote; that one goes on.
func TestARegistrationWaitingForItsTurnGivesUpWhenTheRemoteStopsAnswering(t *testing.T) {
	t.Run("of its branch", func(t *testing.T) {
		m, spec := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
		w := m.workerOf(liveKey)
		second := spec
		second.Key, second.Folder = types.NamespacedName{Namespace: "ops", Name: "second"}, "second"
		w.mu.Lock() // a push begins
		done := w.onRemote()
		first := make(chan error, 1)
		go func() { _, err := m.EnsureTarget(context.Background(), spec); first <- err }()
		require.Eventually(t, func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.joining[w.key] == 1
		}, 5*time.Second, time.Millisecond, "the first registration has its turn, past its start, and waits for the branch")
		w.remoteSince.Store(time.Now().Add(-slowRemote - time.Second).UnixNano()) // the push stops answering

		_, err := m.EnsureTarget(context.Background(), second)

		require.ErrorIs(t, err, ErrRemoteBusy)
		assert.Contains(t, err.Error(), "(branch main)")
		_, registered := m.Status(second.Key)
		assert.False(t, registered, "nothing of it changed")
		done()
		w.mu.Unlock()
		require.NoError(t, <-first, "the remote answers again")
	})
	t.Run("of the branch the holder's target moves away from", func(t *testing.T) {
		m, spec := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
		old := m.workerOf(liveKey)
		elsewhere := repotest.NewFileRemote(t)
		elsewhere.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
		settled := spec
		settled.Key, settled.URL, settled.Folder = types.NamespacedName{Namespace: "ops", Name: "settled"}, elsewhere.URL, "settled"
		_, err := m.EnsureTarget(context.Background(), settled)
		require.NoError(t, err)
		moving := spec
		moving.URL = elsewhere.URL // its GitProvider now points elsewhere
		old.mu.Lock()              // a push on the old branch begins
		done := old.onRemote()
		first := make(chan error, 1)
		go func() { _, err := m.EnsureTarget(context.Background(), moving); first <- err }()
		require.Eventually(t, func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			_, routed := m.targets[liveKey]
			return !routed
		}, 5*time.Second, time.Millisecond, "it holds the new branch's turn and waits to leave the old one")
		old.remoteSince.Store(time.Now().Add(-slowRemote - time.Second).UnixNano()) // the push stops answering

		_, err = m.EnsureTarget(context.Background(), settled) // its poll

		require.ErrorIs(t, err, ErrRemoteBusy, "not held for the old branch's Git timeout")
		done()
		old.mu.Unlock()
		require.NoError(t, <-first)
	})
}

func TestACommitCreditsThePersonWhoseChangeALaterWriterTookAlong(t *testing.T) {
	m, remote, spec := unregisteredManager(t)
	b, live := clusterConfigMap("b", "1")
	m.opts.Resolver = fixedResolver{b: live}
	_, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	m.Submit(Change{Target: liveKey, Key: b, Author: "alice"})                              // alice creates b
	m.Submit(Change{Target: liveKey, Key: b, Author: "system:serviceaccount:ops:operator"}) // its operator writes to it before the window closed

	w := m.workerOf(liveKey)
	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:ops:operator", repotest.Git(t, remote.Dir, "log", "-1", "--format=%an", "refs/heads/main"),
		"the last writer authors the commit")
	assert.Equal(t, "Co-authored-by: alice <alice@cluster.local>",
		repotest.Git(t, remote.Dir, "log", "-1", "--format=%(trailers:key=Co-authored-by)", "refs/heads/main"), "alice's create is in it")
}

func TestARegistrationTurnIsDroppedOnceNoRegistrationNeedsIt(t *testing.T) {
	m, spec := registeredManager(t, map[string]string{"live/README.md": "objects\n"})
	other := spec
	other.Key, other.Branch, other.Folder = types.NamespacedName{Namespace: "ops", Name: "pr-1"}, "other", "pr-1"
	_, err := m.EnsureTarget(context.Background(), other) // a GitTarget per pull request's branch
	require.NoError(t, err)
	m.RemoveTarget(other.Key)

	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Empty(t, m.registering, "a turn is kept only while a registration holds or waits for it")
}
