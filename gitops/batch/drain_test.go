package batch_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// openWindow leaves alice's window open with a new ConfigMap and the deletion of one Git
// has: the window would close only in an hour.
func openWindow(t *testing.T, opts batch.Options) *writerScene {
	t.Helper()
	return openWindowOn(t, repotest.NewFileRemote(t), opts)
}

// openWindowOn is openWindow on an empty remote of the test's.
func openWindowOn(t *testing.T, remote *repotest.Remote, opts batch.Options) *writerScene {
	t.Helper()
	s := newWriterSceneOn(t, remote, nil, opts)
	gone := s.cluster.put(cmGVR, "ConfigMap", "gone", map[string]any{"k": "v"})
	s.submitAndSettle(gone)
	require.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/gone.yaml")
	s.spec.Window = batch.WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour, MaxChanges: 100}
	s.ensure()

	s.cluster.mu.Lock()
	delete(s.cluster.objs, gone)
	s.cluster.mu.Unlock()
	added := s.cluster.put(cmGVR, "ConfigMap", "added", map[string]any{"k": "v"})
	s.writer.Submit(batch.Change{Target: targetKey, Key: gone, Deleted: true, Author: "alice"},
		batch.Change{Target: targetKey, Key: added, Author: "alice"})
	require.False(t, s.writer.Settled(targetKey), "alice's window is open")
	return s
}

func TestStoppingCommitsOpenWindowsUnderTheirAuthors(t *testing.T) {
	s := openWindow(t, batch.Options{WorkDir: t.TempDir()})
	before := s.commits()
	s.stop()
	require.Equal(t, before+1, s.commits(), "the open window is committed before the writer stops")
	tree := s.remote.LsTree("main")
	assert.Contains(t, tree, "live/app/configmaps/added.yaml")
	assert.NotContains(t, tree, "live/app/configmaps/gone.yaml", "a deletion a restart could not see again is kept")
	assert.Equal(t, "alice", repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%an", "main"))
}

func TestStoppingWithANegativeDrainTimeoutAbandonsOpenWindows(t *testing.T) {
	s := openWindow(t, batch.Options{WorkDir: t.TempDir(), DrainTimeout: -1})
	before := s.commits()
	s.stop()
	assert.Equal(t, before, s.commits(), "as a kill would: the snapshot after a restart recovers what it can")
}

// The drain's bound is what the pod's grace period leaves for it: a push it cuts short is
// not followed by a look at the remote that would take up to 15 s more (and the rest of the
// grace period, which saving the folder indexes needs).
func TestStoppingWhileTheRemoteHangsTakesNoLongerThanTheDrainTimeout(t *testing.T) {
	var hang atomic.Bool
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang.Load() {
				<-r.Context().Done() // accepts, never answers
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	for _, gitTimeout := range []time.Duration{0, 500 * time.Millisecond} { // the default 2 min, or shorter than the drain
		s := openWindowOn(t, remote, batch.Options{WorkDir: t.TempDir(), DrainTimeout: time.Second, GitTimeout: gitTimeout})
		hang.Store(true)
		start := time.Now()
		s.stop()
		assert.Less(t, time.Since(start), 5*time.Second, "git timeout %s", gitTimeout)
		hang.Store(false)
	}
}
