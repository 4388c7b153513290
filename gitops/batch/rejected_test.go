package batch_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// declineAuthor installs a pre-receive hook in the remote that declines every update
// carrying a commit by author, as a server's push rule or push protection declines one
// commit for what it holds or who wrote it; it returns a function removing the hook.
func declineAuthor(t *testing.T, remote *repotest.Remote, author string) (remove func()) {
	t.Helper()
	hook := onPushBy(t, remote, author, "echo \"commits by "+author+" are not accepted\" >&2; exit 1")
	return func() { require.NoError(t, os.Remove(hook)) }
}

// onPushBy installs a pre-receive hook on remote that runs script (sh) for a push of
// commits by author, and returns the hook's path.
func onPushBy(t *testing.T, remote *repotest.Remote, author, script string) string {
	t.Helper()
	hook := filepath.Join(remote.Dir, "hooks", "pre-receive")
	body := "#!/bin/sh\nwhile read old new ref; do\n" +
		"  if git log --format=%an \"$old..$new\" | grep -qx '" + author + "'; then\n    " + script + "\n  fi\ndone\n"
	require.NoError(t, os.MkdirAll(filepath.Dir(hook), 0o755))
	require.NoError(t, os.WriteFile(hook, []byte(body), 0o755))
	return hook
}

// malloryDeclined is a writer scene whose remote declines mallory's commits, with her
// change of ConfigMap app/hers declined once; allow removes the rule.
func malloryDeclined(t *testing.T) (s *writerScene, remote *repotest.Remote, allow func()) {
	t.Helper()
	remote = repotest.NewHTTPRemote(t)
	s, allow = malloryDeclinedOn(t, remote)
	return s, remote, allow
}

// malloryDeclinedOn is malloryDeclined on a remote of the test's.
func malloryDeclinedOn(t *testing.T, remote *repotest.Remote) (s *writerScene, allow func()) {
	t.Helper()
	s = newWriterSceneOn(t, remote, nil, batch.Options{WorkDir: t.TempDir()})
	allow = declineAuthor(t, remote, "mallory")
	hers := s.cluster.put(cmGVR, "ConfigMap", "hers", map[string]any{"k": "v"})
	s.writer.Submit(batch.Change{Target: targetKey, Key: hers, Author: "mallory"})
	require.Eventually(t, func() bool {
		st, _ := s.writer.Status(targetKey)
		return strings.Contains(st.LastError, "commits by mallory are not accepted")
	}, 10*time.Second, 20*time.Millisecond, "the server's reason reaches status")
	return s, allow
}

func TestACommitTheRemoteDeclinesHoldsBackOnlyItsOwnWindow(t *testing.T) {
	s, remote, allow := malloryDeclined(t)

	his := s.cluster.put(cmGVR, "ConfigMap", "his", map[string]any{"k": "v"})
	s.writer.Submit(batch.Change{Target: targetKey, Key: his, Author: "alice"})
	require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/his.yaml") },
		10*time.Second, 20*time.Millisecond, "alice's window commits while mallory's is declined")
	assert.NotContains(t, remote.LsTree("main"), "hers.yaml")
	st, _ := s.writer.Status(targetKey)
	assert.Contains(t, st.LastError, "commits by mallory are not accepted", "the failure stands until her window commits")

	allow()
	require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/hers.yaml") },
		10*time.Second, 20*time.Millisecond, "her window is retried with its own backoff")
	require.Eventually(t, func() bool { st, _ := s.writer.Status(targetKey); return st.LastError == "" }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, "mallory", repotest.Git(t, remote.Dir, "log", "-1", "--format=%an", "main"))
}

// A decline the look that follows cannot place (ErrMaybeMoved) is fetched for; a branch
// that had not moved tells it was the server's own: held back as declined, with its hint.
func TestACommitTheRemoteDeclinesIsToldDeclinedWhenTheLookAfterItFails(t *testing.T) {
	var pushed atomic.Bool
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case repotest.IsReceivePack(r):
				pushed.Store(true)
			case r.URL.Query().Get("service") == "git-upload-pack" && pushed.CompareAndSwap(true, false):
				http.Error(w, "bad gateway", http.StatusBadGateway) // the look after each push; the fetch then passes
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	s, _ := malloryDeclinedOn(t, remote)
	st, _ := s.writer.Status(targetKey)
	assert.Contains(t, st.LastError, "protected branch", "a decline's hint")
	assert.NotContains(t, st.LastError, "may have moved", "it had not")
	assert.NotContains(t, st.LastError, "looking at the branch again failed", "a transient error would change the status at every attempt")

	his := s.cluster.put(cmGVR, "ConfigMap", "his", map[string]any{"k": "v"})
	s.writer.Submit(batch.Change{Target: targetKey, Key: his, Author: "alice"})
	require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/his.yaml") },
		10*time.Second, 20*time.Millisecond, "alice's window commits: only mallory's is held back")
}

func TestAStopTriesOnceMoreACommitTheRemoteDeclined(t *testing.T) {
	s, remote, allow := malloryDeclined(t)
	allow()
	s.stop() // within her window's hold
	assert.Contains(t, remote.LsTree("main"), "live/app/configmaps/hers.yaml", "drained under her name, not left to a snapshot under the committer's")
	assert.Equal(t, "mallory", repotest.Git(t, remote.Dir, "log", "-1", "--format=%an", "main"))
}
