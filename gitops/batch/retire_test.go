package batch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// liveCluster is a resolver whose objects a test changes while the writer runs.
type liveCluster struct {
	mu      sync.Mutex
	objects map[ObjectKey]*unstructured.Unstructured
}

func (c *liveCluster) Current(_ types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.objects[k]; o != nil {
		return o.DeepCopy(), nil
	}
	return nil, nil
}

func (c *liveCluster) set(name, v string) ObjectKey {
	k, o := clusterConfigMap(name, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects[k] = o
	return k
}

// openFilesUnder counts this process's open files under dir (Linux: /proc/self/fd).
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// runningWriter is a started Manager writing to one remote with quick windows.
type runningWriter struct {
	m       *Manager
	remote  *repotest.Remote
	cluster *liveCluster
	metrics *Metrics
	workDir string
	spec    func(name, branch string) TargetSpec
}

func newRunningWriter(t *testing.T) *runningWriter {
	t.Helper()
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"live/README.md": "objects\n", "second/README.md": "objects\n"}, "seed")
	remote.Seed("other", map[string]string{"live/README.md": "objects\n"}, "seed")
	metrics, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	rw := &runningWriter{remote: remote, cluster: &liveCluster{objects: map[ObjectKey]*unstructured.Unstructured{}},
		metrics: metrics, workDir: t.TempDir()}
	rw.m = NewManager(Options{Log: logr.Discard(), WorkDir: rw.workDir, Resolver: rw.cluster, Metrics: metrics})
	rw.spec = func(name, branch string) TargetSpec {
		return TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: name}, URL: remote.URL, Branch: branch, Folder: name,
			Messages: msgs, Window: WindowConfig{Quiet: 10 * time.Millisecond, MaxDelay: time.Second},
			Committer: Identity{Name: "W", Email: "w@example.com"}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rw.m.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return rw
}

// write changes ConfigMap app/name in the cluster, hands the change to target and waits
// until branch has one more commit.
func (rw *runningWriter) write(t *testing.T, target types.NamespacedName, branch, name, v string) {
	t.Helper()
	before := len(rw.remote.Log(branch))
	rw.m.Submit(Change{Target: target, Key: rw.cluster.set(name, v)})
	require.Eventually(t, func() bool { return len(rw.remote.Log(branch)) == before+1 }, 10*time.Second, 10*time.Millisecond)
}

// ended reports whether w's loop has ended.
func ended(w *worker) bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// clones counts the clones under the work directory.
func (rw *runningWriter) clones(t *testing.T) int {
	t.Helper()
	return len(dirNames(t, rw.workDir))
}

func (rw *runningWriter) workers() int {
	rw.m.mu.Lock()
	defer rw.m.mu.Unlock()
	return len(rw.m.workers)
}

// writingTarget is a running writer with GitTarget ops/live on main, which wrote one object.
func writingTarget(t *testing.T) (*runningWriter, TargetSpec) {
	t.Helper()
	rw := newRunningWriter(t)
	live := rw.spec("live", "main")
	_, err := rw.m.EnsureTarget(context.Background(), live)
	require.NoError(t, err)
	rw.write(t, live.Key, "main", "a", "one")
	return rw, live
}

func TestAWorkerNoTargetUsesIsRetired(t *testing.T) {
	t.Run("releases the worker, its open files and its metric series once its last target is suspended", func(t *testing.T) {
		rw, live := writingTarget(t)
		w := rw.m.workerOf(live.Key)
		require.Positive(t, openFilesUnder(t, rw.workDir), "the clone's packfile is open while it writes")
		require.Equal(t, 1, testutil.CollectAndCount(rw.metrics.Pending))
		require.Eventually(t, func() bool { return testutil.CollectAndCount(rw.metrics.Pushes) == 1 }, 10*time.Second, 10*time.Millisecond,
			"counted just after the push returns")

		rw.m.SuspendTarget(live.Key, "its GitProvider is gone")

		assert.Zero(t, rw.workers())
		assert.Zero(t, openFilesUnder(t, rw.workDir))
		assert.Zero(t, testutil.CollectAndCount(rw.metrics.Pending))
		assert.Zero(t, testutil.CollectAndCount(rw.metrics.Pushes), "its pushes' series go with it")
		assert.True(t, ended(w), "the worker's loop ended")
	})
	for _, tt := range []struct {
		name   string
		stop   func(*Manager, types.NamespacedName)
		clones int
	}{
		{"keeps the clone of a suspended target and writes on it when the target comes back",
			func(m *Manager, k types.NamespacedName) { m.SuspendTarget(k, "its GitProvider is gone") }, 1},
		{"deletes the clone of a deleted target and clones afresh for one created again", (*Manager).RemoveTarget, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rw, live := writingTarget(t)
			tt.stop(rw.m, live.Key)
			require.Equal(t, tt.clones, rw.clones(t))

			_, err := rw.m.EnsureTarget(context.Background(), live)
			require.NoError(t, err)
			rw.write(t, live.Key, "main", "a", "two")

			assert.Equal(t, configMapDoc("a", "two"), rw.remote.Show("main", "live/app/configmaps/a.yaml")+"\n")
			rw.remote.Fsck()
		})
	}
	t.Run("retires the old worker of a target moved to another branch", func(t *testing.T) {
		rw := newRunningWriter(t)
		live := rw.spec("live", "main")
		_, err := rw.m.EnsureTarget(context.Background(), live)
		require.NoError(t, err)
		old := rw.m.workerOf(live.Key)

		moved := rw.spec("live", "other")
		_, err = rw.m.EnsureTarget(context.Background(), moved)
		require.NoError(t, err)

		assert.Equal(t, 1, rw.workers())
		assert.NotSame(t, old, rw.m.workerOf(live.Key))
		assert.True(t, ended(old), "the old worker's loop ended")
		assert.Equal(t, 1, rw.clones(t), "no target calls the old clone home any more")
		rw.write(t, live.Key, "other", "a", "one")
	})
	t.Run("deletes the clone of a target deleted while suspended", func(t *testing.T) {
		rw, live := writingTarget(t)
		rw.m.SuspendTarget(live.Key, "its GitProvider is gone") // e.g. its GitProvider deleted first
		require.Equal(t, 1, rw.clones(t))

		rw.m.RemoveTarget(live.Key)

		assert.Zero(t, rw.clones(t))
	})
	t.Run("keeps the clone a suspended target calls home when another target on it is deleted", func(t *testing.T) {
		rw, live := writingTarget(t)
		second := rw.spec("second", "main")
		_, err := rw.m.EnsureTarget(context.Background(), second)
		require.NoError(t, err)
		rw.m.SuspendTarget(second.Key, "its GitProvider is gone")

		rw.m.RemoveTarget(live.Key)

		assert.Equal(t, 1, rw.clones(t))
		assert.Zero(t, rw.workers())
	})
	t.Run("deletes the old clone of a suspended target that comes back on another branch", func(t *testing.T) {
		rw, live := writingTarget(t)
		rw.m.SuspendTarget(live.Key, "its GitProvider is gone")

		_, err := rw.m.EnsureTarget(context.Background(), rw.spec("live", "other"))
		require.NoError(t, err)

		assert.Equal(t, 1, rw.clones(t))
		rw.write(t, live.Key, "other", "a", "one")
	})
	t.Run("keeps a worker another target still uses", func(t *testing.T) {
		rw := newRunningWriter(t)
		live, second := rw.spec("live", "main"), rw.spec("second", "main")
		for _, s := range []TargetSpec{live, second} {
			_, err := rw.m.EnsureTarget(context.Background(), s)
			require.NoError(t, err)
		}
		w := rw.m.workerOf(live.Key)

		rw.m.RemoveTarget(live.Key)

		assert.Same(t, w, rw.m.workerOf(second.Key))
		rw.write(t, second.Key, "main", "b", "one")
	})
	t.Run("never loses a target registering on the worker while its last other target is deleted", func(t *testing.T) {
		rw := newRunningWriter(t)
		live, second := rw.spec("live", "main"), rw.spec("second", "main")
		for i := range 20 {
			_, err := rw.m.EnsureTarget(context.Background(), live)
			require.NoError(t, err)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); rw.m.RemoveTarget(live.Key) }()
			go func() {
				defer wg.Done()
				_, err := rw.m.EnsureTarget(context.Background(), second)
				assert.NoError(t, err)
			}()
			wg.Wait()
			require.NotNil(t, rw.m.workerOf(second.Key), "round %d", i)
			rw.m.RemoveTarget(second.Key)
		}
		_, err := rw.m.EnsureTarget(context.Background(), second)
		require.NoError(t, err)
		rw.write(t, second.Key, "main", "b", "one")
		assert.Equal(t, 1, rw.workers())
	})
}
