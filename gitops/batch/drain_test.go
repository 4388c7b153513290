package batch_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

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

// A request handed to a new process waits while its look for an earlier leader's commit
// cannot read the branch's history; a stop cannot wait: its author's changes are committed
// under the author, without the message, which the next process looks for again.
func TestStoppingCommitsTheWindowOfARequestWhoseLookBackFails(t *testing.T) {
	var looks atomic.Int32
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				body, err := io.ReadAll(r.Body)
				if !assert.NoError(t, err) {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				if bytes.Contains(body, []byte("deepen 100")) { // the look's fetch of history; a fetch of the tip passes
					looks.Add(1)
					http.Error(w, "history is not served", http.StatusServiceUnavailable)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(w, r)
		})
	}))
	for i := range 2 { // people's commits: the clone fetches only the tip, whose history is out of sight
		remote.Seed("main", map[string]string{fmt.Sprintf("notes/%d.md", i): "note\n"}, "a person's commit")
	}
	s := openWindowOn(t, remote, batch.Options{WorkDir: t.TempDir()})
	req := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: targetKey, Author: "alice",
		Message: "release 1.2", Created: time.Now().Add(-time.Hour), Deadline: time.Now().Add(time.Hour)} // before this process
	out, err := s.writer.Request(req)
	require.NoError(t, err)
	require.False(t, out.Done)
	require.Eventually(t, func() bool { return looks.Load() > 0 }, 10*time.Second, 10*time.Millisecond)
	require.False(t, s.writer.Settled(targetKey), "her window waits for the look")

	before := s.commits()
	s.stop()

	require.Equal(t, before+1, s.commits(), "her window is committed before the writer stops")
	assert.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/added.yaml")
	assert.Equal(t, "alice", repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%an", "main"))
	assert.NotContains(t, repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%B", "main"), "release 1.2",
		"the message may be on the branch already: not committed a second time")
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

func TestShorteningAnOpenWindowsQuietCommitsItWithoutWaitingForTheOldOne(t *testing.T) {
	s := openWindow(t, batch.Options{WorkDir: t.TempDir()})
	// Lets the worker's passes for alice's changes end, so it sleeps on the hour-long window;
	// a later pass could only make this test pass without the wake-up, never fail it.
	time.Sleep(300 * time.Millisecond)
	s.spec.Window = batch.WindowConfig{Quiet: 10 * time.Millisecond, MaxDelay: time.Hour, MaxChanges: 100}
	s.ensure()
	require.Eventually(t, func() bool { return s.writer.Settled(targetKey) }, 10*time.Second, 20*time.Millisecond,
		"the window closes on the new quiet, not after the hour the worker was sleeping for")
	assert.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/added.yaml")
	assert.Equal(t, "alice", repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%an", "main"))
}
