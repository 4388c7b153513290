package batch

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestBuiltCommitTimesEveryBuildButTheChangeOnlyAtItsFirstCommit(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)

	m.builtCommit(2*time.Millisecond, 5*time.Second, true)
	m.builtCommit(3*time.Millisecond, 6*time.Second, false) // a replay after a conflict

	assert.Equal(t, uint64(2), sampleCount(t, m.CommitBuild))
	assert.Equal(t, uint64(1), sampleCount(t, m.ChangeToCommit))
}

func wrap(c prometheus.Collector) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return reg
}

func sampleCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	families, err := wrap(h).Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	return families[0].GetMetric()[0].GetHistogram().GetSampleCount()
}

func TestPendingChangesLeaveTheGaugeWithTheirTarget(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	key := workerKey{url: "https://git.example/repo.git", branch: "main"}
	w := newWorker(key, nil, Options{Metrics: m}, func(*CommitRequest, RequestOutcome) {})
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	q := w.openQueue(target)
	w.qmu.Lock()
	q.add(qkey("a"), anUpdate, "alice", time.Now())
	q.add(qkey("b"), anUpdate, "alice", time.Now())
	w.qmu.Unlock()
	w.reportPending()
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Pending.WithLabelValues(key.url, key.branch)))

	moved := w.removeTarget(target, false)
	assert.Len(t, moved, 2)
	assert.Zero(t, testutil.ToFloat64(m.Pending.WithLabelValues(key.url, key.branch)), "they went with the target to its next worker")
}

func TestTheOldestPendingChangeIsWhenItWasRecordedWhoeverWaitsOnTheWorker(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	key := workerKey{url: "https://git.example/repo.git", branch: "main"}
	w := newWorker(key, nil, Options{Metrics: m}, func(*CommitRequest, RequestOutcome) {})
	oldest := func() float64 { return testutil.ToFloat64(m.OldestPending.WithLabelValues(key.url, key.branch)) }
	w.reportPending()
	assert.Zero(t, oldest(), "nothing waits")

	live, staging := types.NamespacedName{Namespace: "ops", Name: "live"}, types.NamespacedName{Namespace: "ops", Name: "staging"}
	monday := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	ql, qs := w.openQueue(live), w.openQueue(staging)
	w.qmu.Lock()
	ql.add(qkey("a"), anUpdate, "alice", monday.Add(time.Minute))
	qs.add(qkey("b"), anUpdate, "bob", monday)
	ql.add(qkey("c"), anUpdate, "alice", monday.Add(2*time.Minute))
	w.qmu.Unlock()
	w.reportPending()
	assert.Equal(t, float64(monday.Unix()), oldest(), "bob's change on the other target is the oldest")

	w.qmu.Lock()
	failing, _ := qs.due(WindowConfig{}, monday.Add(time.Hour))
	qs.flushing = failing
	w.qmu.Unlock()
	w.reportPending()
	assert.Equal(t, float64(monday.Unix()), oldest(), "a window being committed is not delivered yet")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Pending.WithLabelValues(key.url, key.branch)), "nor are its objects")

	w.qmu.Lock()
	qs.flushing = nil
	qs.retry(failing[0], monday.Add(time.Hour))
	w.qmu.Unlock()
	w.reportPending()
	assert.Equal(t, float64(monday.Unix()), oldest(), "a window whose push failed keeps its age")

	w.removeTarget(staging, false)
	assert.Equal(t, float64(monday.Add(time.Minute).Unix()), oldest(), "bob's change left with its target")
	w.removeTarget(live, false)
	assert.Zero(t, oldest())
}

func TestEveryPushAttemptIsCountedOnceUnderItsOutcome(t *testing.T) {
	var racing atomic.Bool
	var attempts atomic.Int32
	var remote *repotest.Remote
	remote = repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Query().Get("service") == "git-receive-pack" {
				attempts.Add(1) // one ref advertisement per push attempt
				if racing.Load() {
					// Someone else pushes first, every time: each attempt finds the branch moved.
					remote.Seed("main", map[string]string{"other/n.txt": fmt.Sprint(attempts.Load())}, "a person's commit")
				}
			}
			next.ServeHTTP(w, r)
		})
	}))
	writer, m, cluster, key := measuredWriter(t, remote)
	count := func(outcome string) float64 {
		return testutil.ToFloat64(m.Pushes.WithLabelValues(key.url, key.branch, outcome))
	}

	racing.Store(true)
	attempts.Store(0)
	writer.Submit(Change{Target: liveKey, Key: cluster.set("a", "1")})
	require.Eventually(t, func() bool { return count("failed") >= 1 }, 30*time.Second, 10*time.Millisecond,
		"a flush gives up after its last replay")
	racing.Store(false)
	require.Eventually(t, func() bool { return count("pushed") == 1 }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, float64(attempts.Load()), count("conflict")+count("failed")+count("pushed"),
		"a last attempt that finds the branch moved is a failure, not also a conflict")
	assert.GreaterOrEqual(t, count("conflict"), float64(maxPushAttempts-1))
	assert.Equal(t, count("failed"), testutil.ToFloat64(m.Failures.WithLabelValues(key.url, key.branch)),
		"each window that gave up is a commit failure, retried")
}

func TestACommitThatFailsBeforeItsPushIsCounted(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	key := workerKey{url: "https://git.example/repo.git", branch: "main"}
	m.failed(key)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Failures.WithLabelValues(key.url, key.branch)))
	m.forget(key)
	assert.Zero(t, testutil.CollectAndCount(m.Failures), "a retired worker's series goes")
}

// A push whose answer is lost, and the look at the remote that follows fails too, is
// counted failed; its retry finds the commit there and nothing to commit. The window was
// delivered, and the latency histograms, which the "delivery is slow" alert reads, have it.
func TestAWindowWhosePushLandedUnconfirmedIsTimedWhenFoundDelivered(t *testing.T) {
	var lose atomic.Int32 // 2: drop the next push's answer; 1: then fail the next ref listing
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case repotest.IsReceivePack(r) && lose.CompareAndSwap(2, 1):
				next.ServeHTTP(discarded{w.Header()}, r) // the server takes the update
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return
			case r.URL.Query().Get("service") == "git-upload-pack" && lose.CompareAndSwap(1, 0):
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	writer, m, cluster, key := measuredWriter(t, remote)

	lose.Store(2)
	writer.Submit(Change{Target: liveKey, Key: cluster.set("a", "1")})
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(m.Pushes.WithLabelValues(key.url, key.branch, "failed")) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return writer.Settled(liveKey) }, 10*time.Second, 10*time.Millisecond)
	assert.Len(t, remote.Log("main"), 2, "one commit, the one whose answer was lost")
	assert.Equal(t, uint64(1), sampleCount(t, m.ChangeToPush))
	assert.Equal(t, uint64(1), sampleCount(t, m.CommitToPush))
}

// Over HTTP a race lost between the ref advertisement and the update is declined like a
// protected branch; when the look that follows fails too, the flush fetches and replays at
// once rather than holding the window back as declined: one failed push, no commit failure.
func TestARaceLostWhenTheRemoteCannotBeLookedAtAgainIsReplayedAtOnce(t *testing.T) {
	var race, lookFails atomic.Bool
	var remote *repotest.Remote
	remote = repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case repotest.IsReceivePack(r) && race.CompareAndSwap(true, false):
				remote.Seed("main", map[string]string{"other/n.txt": "1"}, "a person's commit, mid-push")
				lookFails.Store(true)
			case r.URL.Query().Get("service") == "git-upload-pack" && lookFails.CompareAndSwap(true, false):
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	writer, m, cluster, key := measuredWriter(t, remote)
	count := func(outcome string) float64 {
		return testutil.ToFloat64(m.Pushes.WithLabelValues(key.url, key.branch, outcome))
	}

	race.Store(true)
	writer.Submit(Change{Target: liveKey, Key: cluster.set("a", "1")})
	require.Eventually(t, func() bool { return count("pushed") == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.False(t, lookFails.Load(), "the look after the declined update was made, and failed")
	assert.Equal(t, 1.0, count("failed"), "the declined attempt")
	assert.Zero(t, testutil.ToFloat64(m.Failures.WithLabelValues(key.url, key.branch)),
		"replayed in the same flush: not a failed window held back as declined")
	st, _ := writer.Status(liveKey)
	assert.Empty(t, st.LastError)
	assert.Len(t, remote.Log("main"), 3, "the person's commit kept, ours on top")
}

// discarded is a ResponseWriter that drops what is written to it.
type discarded struct{ h http.Header }

func (d discarded) Header() http.Header         { return d.h }
func (d discarded) Write(b []byte) (int, error) { return len(b), nil }
func (d discarded) WriteHeader(int)             {}

// measuredWriter runs a writer with metrics and registers liveKey on the remote, which it
// seeds.
func measuredWriter(t *testing.T, remote *repotest.Remote) (*Manager, *Metrics, *liveCluster, workerKey) {
	t.Helper()
	writer, m, cluster, spec := measuredWriterFor(t, remote)
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	return writer, m, cluster, workerKey{url: repo.NormalizeURL(remote.URL), branch: "main"}
}

// measuredWriterFor seeds remote and runs a writer with metrics; spec is target ops/live on
// it, not registered yet.
func measuredWriterFor(t *testing.T, remote *repotest.Remote) (*Manager, *Metrics, *liveCluster, TargetSpec) {
	t.Helper()
	remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	cluster := &liveCluster{objects: map[ObjectKey]*unstructured.Unstructured{}}
	writer := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), Resolver: cluster, Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = writer.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	spec := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Window: WindowConfig{MaxDelay: time.Second, MaxChanges: 100}, Committer: Identity{Name: "W", Email: "w@example.com"}}
	return writer, m, cluster, spec
}

// An operator started during a Git outage never reads its targets' branches: their windows
// cannot commit, and the "commits keep failing" alert must see it.
func TestChangesWaitingOnATargetThatNeverReadItsBranchCountAsFailures(t *testing.T) {
	var down atomic.Bool
	remote := repotest.NewHTTPRemote(t, repotest.DownWhile(&down))
	writer, m, cluster, spec := measuredWriterFor(t, remote)
	down.Store(true)
	key := workerKey{url: repo.NormalizeURL(remote.URL), branch: "main"}
	failures := func() float64 { return testutil.ToFloat64(m.Failures.WithLabelValues(key.url, key.branch)) }

	_, err := writer.EnsureTarget(context.Background(), spec)
	require.Error(t, err)
	assert.Zero(t, failures(), "nothing waits yet: a failed fetch alone is no failed commit")
	writer.Submit(Change{Target: liveKey, Key: cluster.set("app", "v"), Author: "alice"})
	_, err = writer.EnsureTarget(context.Background(), spec) // the GitTarget's retry
	require.Error(t, err)
	assert.Equal(t, 1.0, failures())
}

// unsyncedResolver is fixedResolver but for one object, whose cache never syncs.
type unsyncedResolver struct {
	fixedResolver
	unsynced ObjectKey
}

func (r unsyncedResolver) Current(target types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	if k == r.unsynced {
		return nil, ErrNotSynced
	}
	return r.fixedResolver.Current(target, k)
}

func sampleSum(t *testing.T, h prometheus.Histogram) float64 {
	t.Helper()
	families, err := wrap(h).Gather()
	require.NoError(t, err)
	return families[0].GetMetric()[0].GetHistogram().GetSampleSum()
}

func TestAnObjectWaitingForItsCacheDoesNotAgeItsAuthorsLaterCommits(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	d, _ := clusterConfigMap("d", "x")
	k1, o1 := clusterConfigMap("k1", "1")
	k2, o2 := clusterConfigMap("k2", "2")
	writer, _ := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"},
		Options{Metrics: m, Resolver: unsyncedResolver{fixedResolver{k1: o1, k2: o2}, d}})
	w := writer.workerOf(liveKey)
	ctx := context.Background()
	writer.Submit(Change{Target: liveKey, Key: d, Author: "alice"}) // its informer never syncs (RBAC, say)
	_, err = w.flushIfDue(ctx, liveKey, 2*time.Hour)
	require.NoError(t, err)
	w.qmu.Lock()
	q := w.queues[liveKey]
	require.Contains(t, q.windows, "alice", "d waits for its cache")
	q.windows["alice"].First, q.since[d] = q.windows["alice"].First.Add(-time.Hour), q.since[d].Add(-time.Hour) // an hour ago
	w.qmu.Unlock()

	for _, k := range []ObjectKey{k1, k2} { // her later changes, each committed at once
		writer.Submit(Change{Target: liveKey, Key: k, Author: "alice"})
		_, err = w.flushIfDue(ctx, liveKey, 2*time.Hour)
		require.NoError(t, err)
	}

	files := filesAtTip(t, w, "live")
	require.Contains(t, files, "live/app/configmaps/k2.yaml")
	assert.Equal(t, uint64(2), sampleCount(t, m.ChangeToPush))
	assert.Less(t, sampleSum(t, m.ChangeToPush), 30*60.0, "each took moments, not d's hour")
	assert.Equal(t, uint64(2), sampleCount(t, m.ChangeToCommit), "k2's commit is its first too")
	assert.Less(t, sampleSum(t, m.ChangeToCommit), 30*60.0)
	assert.Less(t, sampleSum(t, m.CommitToPush), 30*60.0)
}
