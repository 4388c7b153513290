package batch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// startWriter runs a writer over a fresh work dir and returns it with the cluster it reads;
// for scenes that need their own remote and targets (writerScene has both made for it).
func startWriter(t *testing.T) (*batch.Manager, *cluster) {
	t.Helper()
	c := &cluster{objs: map[batch.ObjectKey]*unstructured.Unstructured{}}
	writer := batch.NewManager(batch.Options{Resolver: c, Log: logr.Discard(), WorkDir: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = writer.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return writer, c
}

// targetSpec is GitTarget ops/<folder> on branch main of url, writing folder with the
// default messages; its windows close only when a CommitRequest closes them.
func targetSpec(t *testing.T, folder, url string, auth transport.AuthMethod) batch.TargetSpec {
	t.Helper()
	msgs, err := batch.ParseMessages("", "")
	require.NoError(t, err)
	return batch.TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: folder}, URL: url, Branch: "main", Folder: folder,
		Messages: msgs, Window: batch.WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour, MaxChanges: 100},
		Committer: batch.Identity{Name: "Writer", Email: "w@example.com"}, Auth: auth}
}

// liveWriter seeds remote and runs a writer with target ops/live registered on it.
func liveWriter(t *testing.T, remote *repotest.Remote) (*batch.Manager, *cluster) {
	t.Helper()
	remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	writer, c := startWriter(t)
	_, err := writer.EnsureTarget(context.Background(), targetSpec(t, "live", remote.URL, nil))
	require.NoError(t, err)
	return writer, c
}

// alicesRelease submits a change by alice to ops/live and her CommitRequest "release 1.2",
// which closes her window (askedQuiet after it).
func alicesRelease(t *testing.T, writer *batch.Manager, c *cluster) batch.CommitRequest {
	t.Helper()
	writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}), Author: "alice"})
	req := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: targetKey, Author: "alice",
		Message: "release 1.2", Deadline: time.Now().Add(time.Minute)}
	_, err := writer.Request(req)
	require.NoError(t, err)
	return req
}

func TestACommitRequestSaysWhyItsMessageIsNotCommittedYet(t *testing.T) {
	t.Run("reports Retrying with the push error while the remote refuses, then the commit with the message", func(t *testing.T) {
		var refuse atomic.Bool
		remote := repotest.NewHTTPRemote(t, repotest.RefusePushesWhile(&refuse, http.StatusServiceUnavailable, "the remote is down for maintenance"))
		writer, c := liveWriter(t, remote)

		refuse.Store(true)
		req := alicesRelease(t, writer, c)
		var err error

		var out batch.RequestOutcome
		require.Eventually(t, func() bool {
			out, err = writer.Request(req)
			return err == nil && out.Reason == batch.ReasonRetrying
		}, 10*time.Second, 50*time.Millisecond, "the request learns that its commit failed")
		assert.False(t, out.Done, "not final: the commit is retried")
		assert.Contains(t, out.Message, "503")

		refuse.Store(false)
		require.Eventually(t, func() bool {
			out, err = writer.Request(req)
			return err == nil && out.Done
		}, 15*time.Second, 100*time.Millisecond, "the retried commit carries the message")
		assert.Equal(t, batch.ReasonCommitted, out.Reason)
		assert.Contains(t, remote.Log("main")[0], "release 1.2")
	})
}

// lostAnswerRelease runs alicesRelease against a remote that lands the push of her commit
// but loses its answer, then fails the writer's check of where the branch is, calling
// meanwhile (nil for nothing) just before; it returns the remote and the request's outcome.
func lostAnswerRelease(t *testing.T, meanwhile func(*repotest.Remote, *batch.Manager, *cluster)) (*repotest.Remote, *batch.Manager, batch.CommitRequest, batch.RequestOutcome) {
	t.Helper()
	return lostAnswer(t, meanwhile, true)
}

// lostAnswer is lostAnswerRelease whose check of where the branch is, after the lost
// answer, fails (checkFails) or answers; meanwhile runs just before that check.
func lostAnswer(t *testing.T, meanwhile func(*repotest.Remote, *batch.Manager, *cluster), checkFails bool) (*repotest.Remote, *batch.Manager, batch.CommitRequest, batch.RequestOutcome) {
	t.Helper()
	var phase atomic.Int32 // 1: lose the push's answer; 2: then fail the check of where the branch is
	var remote *repotest.Remote
	var writer *batch.Manager
	var c *cluster
	remote = repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case loseAnswer(&phase, next, w, r):
				return
			case phase.Load() == 2 && r.URL.Query().Get("service") == "git-upload-pack":
				phase.Store(0)
				if meanwhile != nil {
					meanwhile(remote, writer, c)
				}
				if checkFails {
					http.Error(w, "unreachable", http.StatusServiceUnavailable)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}))
	writer, c = liveWriter(t, remote)
	phase.Store(1)
	req := alicesRelease(t, writer, c)
	var out batch.RequestOutcome
	var err error
	require.Eventually(t, func() bool {
		out, err = writer.Request(req)
		return err == nil && out.Done
	}, 15*time.Second, 50*time.Millisecond)
	return remote, writer, req, out
}

// loseAnswer, in phase 1, lets a push land and loses its answer, moving on to phase 2; it
// reports whether it answered r.
func loseAnswer(phase *atomic.Int32, next http.Handler, w http.ResponseWriter, r *http.Request) bool {
	if phase.Load() != 1 || !repotest.IsReceivePack(r) {
		return false
	}
	next.ServeHTTP(httptest.NewRecorder(), r) // the push lands ...
	phase.Store(2)
	http.Error(w, "connection reset", http.StatusBadGateway) // ... and its answer is lost
	return true
}

func TestACommitRequestWhosePushLandedDespiteAnError(t *testing.T) {
	t.Run("reports the commit that carried the message, not NothingToCommit, after the answer to its push was lost", func(t *testing.T) {
		remote, writer, req, out := lostAnswerRelease(t, nil)
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		assert.Equal(t, remote.Head("main"), out.SHA)
		assert.Contains(t, remote.Log("main")[0], "release 1.2")
		assert.Len(t, remote.Log("main"), 2, "one commit besides the seed")
		st, _ := writer.Status(req.Target)
		assert.Empty(t, st.LastError, "the retry found the change delivered: nothing is failing any more")
	})
	t.Run("reports that commit when someone pushed on top of it before the retry", func(t *testing.T) {
		remote, _, _, out := lostAnswerRelease(t, func(remote *repotest.Remote, _ *batch.Manager, _ *cluster) {
			remote.Seed("main", map[string]string{"notes/today.md": "released\n"}, "a person's commit")
		})
		log := remote.Log("main")
		require.Len(t, log, 3, "the seed, alice's commit, the person's")
		assert.Contains(t, log[0], "a person's commit")
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		assert.Equal(t, log[1], out.SHA+" release 1.2", "the commit that carried the message, under the person's")
	})
	t.Run("reports that commit when people pushed two commits on top of it before the retry", func(t *testing.T) {
		remote, _, _, out := lostAnswerRelease(t, func(remote *repotest.Remote, _ *batch.Manager, _ *cluster) {
			remote.Seed("main", map[string]string{"notes/today.md": "released\n"}, "a person's commit")
			remote.Seed("main", map[string]string{"notes/tomorrow.md": "planned\n"}, "another person's commit")
		})
		log := remote.Log("main")
		require.Len(t, log, 4, "the seed, alice's commit, the people's")
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		assert.Equal(t, log[2], out.SHA+" release 1.2", "the commit that carried the message, under the people's")
	})
	t.Run("reports that commit when the check after the lost answer finds someone's commit on top of it", func(t *testing.T) {
		remote, _, _, out := lostAnswer(t, func(remote *repotest.Remote, _ *batch.Manager, _ *cluster) {
			remote.Seed("main", map[string]string{"notes/today.md": "released\n"}, "a person's commit")
		}, false) // the remote answers: it moved, seemingly a lost race
		log := remote.Log("main")
		require.Len(t, log, 3, "the seed, alice's commit, the person's: %v", log)
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		assert.Equal(t, log[1], out.SHA+" release 1.2", "the commit that carried the message, under the person's")
	})
	t.Run("carries the message once when its author changed something else before the retry", func(t *testing.T) {
		remote, _, _, out := lostAnswerRelease(t, func(_ *repotest.Remote, writer *batch.Manager, c *cluster) {
			writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "other", map[string]any{"k": "v"}),
				Author: "alice"})
		})
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "configmaps/other.yaml") },
			15*time.Second, 50*time.Millisecond, "her other change is committed too")
		carrying := 0
		for _, line := range remote.Log("main") {
			if strings.Contains(line, "release 1.2") {
				carrying++
				assert.Equal(t, out.SHA+" release 1.2", line, "the status names the commit that carried it")
			}
		}
		assert.Equal(t, 1, carrying, "one commit carries the message: %v", remote.Log("main"))
	})
	t.Run("reports that commit when someone else changed its object before the retry", func(t *testing.T) {
		remote, _, _, out := lostAnswerRelease(t, func(_ *repotest.Remote, writer *batch.Manager, c *cluster) {
			// The object leaves alice's window for bob's: hers keeps only the request.
			writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "bob's"}),
				Author: "bob"})
		})
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		assert.Contains(t, remote.Log("main"), out.SHA+" release 1.2", "the commit that carried it")
	})
	t.Run("removes what that commit wrote when its author deleted the object before the retry", func(t *testing.T) {
		remote, _, _, out := lostAnswerRelease(t, func(_ *repotest.Remote, writer *batch.Manager, c *cluster) {
			key := batch.ObjectKey{GVR: cmGVR, Kind: "ConfigMap", Namespace: "app", Name: "app"}
			c.mu.Lock()
			delete(c.objs, key)
			c.mu.Unlock()
			writer.Submit(batch.Change{Target: targetKey, Key: key, Deleted: true, Author: "alice"})
		})
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		assert.Contains(t, remote.Log("main"), out.SHA+" release 1.2", "the commit that carried it")
		require.Eventually(t, func() bool { return !strings.Contains(remote.LsTree("main"), "configmaps/app.yaml") },
			15*time.Second, 50*time.Millisecond, "Git follows the cluster: the retry judged the tip the lost push left, not the one before")
		assert.Len(t, slices.DeleteFunc(remote.Log("main"), func(l string) bool { return !strings.Contains(l, "release 1.2") }), 1,
			"the removal's commit does not carry the message again")
	})
}

func TestASuspendedTargetKeepsItsPendingChanges(t *testing.T) {
	t.Run("removes a document whose delete was seen before or during a suspension, once the target registers again", func(t *testing.T) {
		s := newWriterScene(t, nil)
		a := s.cluster.put(cmGVR, "ConfigMap", "a", map[string]any{"k": "v"})
		b := s.cluster.put(cmGVR, "ConfigMap", "b", map[string]any{"k": "v"})
		s.submitAndSettle(a, b)
		require.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/a.yaml")
		require.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/b.yaml")
		s.spec.Window.Quiet, s.spec.Window.MaxDelay = time.Hour, time.Hour
		s.ensure()

		gone := func(k batch.ObjectKey) {
			s.cluster.mu.Lock()
			delete(s.cluster.objs, k)
			s.cluster.mu.Unlock()
			s.writer.Submit(batch.Change{Target: targetKey, Key: k, Deleted: true}) // the delete event
		}
		gone(a)                                                      // pending in a window when the provider goes away
		s.writer.SuspendTarget(targetKey, "its GitProvider is gone") // e.g. its GitProvider briefly NotFound
		gone(b)                                                      // seen while suspended
		s.spec.Window.Quiet = 0
		s.ensure()
		// the watcher's resync after registration: nothing is listed, and under OnEvent a
		// snapshot alone keeps orphans
		s.writer.Snapshot(batch.Snapshot{Target: targetKey, GVR: cmGVR, Kind: "ConfigMap", InScope: func(string) bool { return true }})
		require.Eventually(t, func() bool {
			tree := s.remote.LsTree("main")
			return !strings.Contains(tree, "configmaps/a.yaml") && !strings.Contains(tree, "configmaps/b.yaml")
		}, 10*time.Second, 50*time.Millisecond, "both deletes reach Git")
	})
}

func TestStatusStopsCountingAnOrphanOnceItsDocumentIsRemoved(t *testing.T) {
	s := newWriterScene(t, nil)
	gone := s.cluster.put(cmGVR, "ConfigMap", "gone", map[string]any{"k": "v"})
	s.submitAndSettle(gone)
	s.cluster.mu.Lock()
	delete(s.cluster.objs, gone) // deleted while nobody watched
	s.cluster.mu.Unlock()
	s.writer.Snapshot(batch.Snapshot{Target: targetKey, GVR: cmGVR, Kind: "ConfigMap", InScope: func(string) bool { return true }})
	st, _ := s.writer.Status(targetKey)
	require.Equal(t, 1, st.Orphans, "prune mode OnEvent keeps it")
	// Its deletion comes after the list: recovered from the journal after a restart (a
	// snapshot hands those over just before it counts), or seen now.
	st = s.deleteAndSettle(gone)
	require.NotContains(t, s.remote.LsTree("main"), "configmaps/gone.yaml")
	assert.Equal(t, 0, st.Orphans, "the document left Git; no list since")
}

// unsyncedScene runs a writer (quiet 100 ms) on a seeded remote with ConfigMap app/broken
// in the cluster, its cache not synced.
func unsyncedScene(t *testing.T) (*repotest.Remote, *batch.Manager, *cluster, batch.ObjectKey) {
	t.Helper()
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	writer, c := startWriter(t)
	spec := targetSpec(t, "live", remote.URL, nil)
	spec.Window = batch.WindowConfig{Quiet: 100 * time.Millisecond, MaxDelay: time.Hour, MaxChanges: 100}
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	broken := c.put(cmGVR, "ConfigMap", "broken", map[string]any{"k": "v"})
	c.setSynced(broken, false)
	return remote, writer, c, broken
}

func TestAnObjectWhoseCacheIsIncompleteHoldsBackNothingElse(t *testing.T) {
	t.Run("commits an author's other changes while one object's cache has not synced, and that object once it has", func(t *testing.T) {
		remote, writer, c, broken := unsyncedScene(t)
		app := c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"})
		writer.Submit(batch.Change{Target: targetKey, Key: broken, Author: "alice"},
			batch.Change{Target: targetKey, Key: app, Author: "alice"})

		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/app.yaml") },
			10*time.Second, 50*time.Millisecond, "the synced object is committed")
		assert.NotContains(t, remote.LsTree("main"), "broken.yaml", "absent from an incomplete cache is no state to write")

		c.setSynced(broken, true)
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/broken.yaml") },
			15*time.Second, 100*time.Millisecond, "the deferred object is committed once its cache is complete")
		remote.Fsck()
	})
	t.Run("tells a request whose window commits without an object still waiting for its cache how many wait", func(t *testing.T) {
		remote, writer, c, broken := unsyncedScene(t)
		// The request first, waiting for her changes: it rides their window whenever it closes.
		req := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: targetKey, Author: "alice",
			Message: "release 1.2", Deadline: time.Now().Add(time.Minute)}
		_, err := writer.Request(req)
		require.NoError(t, err)
		app := c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"})
		writer.Submit(batch.Change{Target: targetKey, Key: broken, Author: "alice"},
			batch.Change{Target: targetKey, Key: app, Author: "alice"})

		out := outcomeOf(t, writer, req, "her window commits what it can")
		assert.Equal(t, batch.ReasonCommitted, out.Reason)
		assert.Equal(t, remote.Head("main"), out.SHA)
		assert.Contains(t, out.Message, "1 of the changes are not in it: the operator's cache of their resource was not complete yet")
		assert.NotContains(t, remote.LsTree("main"), "broken.yaml")
	})
	t.Run("lists an object it refuses in status while the rest of its window waits for a cache", func(t *testing.T) {
		_, writer, c, broken := unsyncedScene(t)
		token := c.put(secretsGVR, "Secret", "token", map[string]any{"k": "dg=="})
		writer.Submit(batch.Change{Target: targetKey, Key: broken, Author: "alice"},
			batch.Change{Target: targetKey, Key: token, Author: "alice"})

		require.Eventually(t, func() bool {
			st, _ := writer.Status(targetKey)
			return len(st.Refused) == 1 && strings.Contains(st.Refused[0], "Secret app/token")
		}, 10*time.Second, 50*time.Millisecond, "a Secret without encryption is refused, and says so before the ConfigMap's cache syncs")
	})
	t.Run("holds back no other author's window, nor marks the target failed, while one author's objects all wait", func(t *testing.T) {
		remote, writer, c, broken := unsyncedScene(t)
		writer.Submit(batch.Change{Target: targetKey, Key: broken, Author: "alice"})
		time.Sleep(2 * time.Second) // alice's window is tried and deferred, twice
		app := c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"})
		writer.Submit(batch.Change{Target: targetKey, Key: app, Author: "bob"})
		// Alice's window never commits (her cache never syncs): were bob's held behind it, it
		// would not commit at all.
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/app.yaml") },
			10*time.Second, 50*time.Millisecond, "bob's change commits after his quiet time, not after alice's backoff")
		st, _ := writer.Status(targetKey)
		assert.Empty(t, st.LastError, "waiting for a cache is no failed write")
	})
}

func TestACommitRequestWaitingOnAStalledFolderSaysSo(t *testing.T) {
	t.Run("reports TargetStalled, not final, while the folder cannot be written, then the commit with the message", func(t *testing.T) {
		remote := repotest.NewFileRemote(t)
		remote.Seed("main", map[string]string{"live/README.md": "objects\n", "live/run.sh": "#!/bin/sh\n"}, "seed")
		writer, c := startWriter(t)
		ctx := context.Background()
		spec := targetSpec(t, "live", remote.URL, nil)
		_, err := writer.EnsureTarget(ctx, spec)
		require.NoError(t, err)

		req := alicesRelease(t, writer, c)
		var out batch.RequestOutcome
		require.Eventually(t, func() bool {
			out, err = writer.Request(req)
			return err == nil && out.Reason == batch.ReasonTargetStalled
		}, 10*time.Second, 50*time.Millisecond, "the request learns why its message waits")
		assert.False(t, out.Done, "not final: the changes commit once the folder is fixed")
		assert.Contains(t, out.Message, "live/run.sh")

		co := remote.Clone("main")
		co.Git("rm", "-q", "live/run.sh")
		co.CommitAndPush("main", "a person removes the script")
		time.Sleep(5100 * time.Millisecond) // the writer fetches at most every 5 s
		_, err = writer.EnsureTarget(ctx, spec)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			out, err = writer.Request(req)
			return err == nil && out.Done
		}, 15*time.Second, 100*time.Millisecond, "the commit carries the message once the folder is fixed")
		assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
		assert.Contains(t, remote.Log("main")[0], "release 1.2")
	})
}

func TestACommitRequestOfATargetThatStopsWritingSaysWhy(t *testing.T) {
	waiting := func(t *testing.T) (*batch.Manager, batch.CommitRequest) {
		writer, _ := liveWriter(t, repotest.NewFileRemote(t))
		// No change by alice yet: the request waits for her next one.
		req := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: targetKey, Author: "alice",
			Message: "release 1.2", Deadline: time.Now().Add(time.Minute)}
		out, err := writer.Request(req)
		require.NoError(t, err)
		require.False(t, out.Done)
		return writer, req
	}
	t.Run("quotes the reason its target was suspended and says to ask again once it is Ready", func(t *testing.T) {
		writer, req := waiting(t)
		writer.SuspendTarget(targetKey, "GitProvider ops/repo: Secret ops/creds not found: create it, or fix spec.secretRef.name")
		out, err := writer.Request(req)
		require.NoError(t, err)
		assert.True(t, out.Done)
		assert.Equal(t, batch.ReasonTargetRemoved, out.Reason)
		assert.Contains(t, out.Message, "Secret ops/creds not found")
		assert.Contains(t, out.Message, "create a new CommitRequest once it is Ready again")
	})
	t.Run("says its target was deleted", func(t *testing.T) {
		writer, req := waiting(t)
		writer.RemoveTarget(targetKey)
		out, err := writer.Request(req)
		require.NoError(t, err)
		assert.Equal(t, batch.ReasonTargetRemoved, out.Reason)
		assert.Contains(t, out.Message, "GitTarget ops/live was deleted")
	})
}

func TestACommitRequestCreatedAgainUnderTheSameNameIsANewRequest(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	writer, c := liveWriter(t, remote)
	spec := targetSpec(t, "live", remote.URL, nil)
	spec.Window = batch.WindowConfig{Quiet: 50 * time.Millisecond, MaxDelay: time.Hour, MaxChanges: 100}
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	first := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, UID: "uid-1", Target: targetKey,
		Author: "alice", Message: "release 1.2 (typo)", Deadline: time.Now().Add(time.Hour)}
	_, err = writer.Request(first) // waits for alice's next change
	require.NoError(t, err)

	// kubectl replace --force: deleted and created again before the deletion was seen.
	again := first
	again.UID, again.Message = "uid-2", "release 1.3"
	out, err := writer.Request(again)
	require.NoError(t, err)
	assert.False(t, out.Done, "a new request: nothing is known of it yet")

	writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}), Author: "alice"})
	require.Eventually(t, func() bool {
		out, err = writer.Request(again)
		return err == nil && out.Done
	}, 15*time.Second, 50*time.Millisecond)
	assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
	log := remote.Log("main")
	assert.Contains(t, log[0], "release 1.3")
	assert.NotContains(t, strings.Join(log, "\n"), "typo", "the deleted request's message is not used")
}

// outcomeOf waits up to 10 s for req's final outcome from writer.
func outcomeOf(t *testing.T, writer *batch.Manager, req batch.CommitRequest, what string) batch.RequestOutcome {
	t.Helper()
	var out batch.RequestOutcome
	require.Eventually(t, func() bool {
		out, _ = writer.Request(req)
		return out.Done
	}, 10*time.Second, 20*time.Millisecond, what)
	return out
}

// holdAuthor makes remote's pushes of commits by author wait until release is called (or
// the test ends): a pre-receive hook, run by the real git http-backend.
// held reports whether such a push has reached the server and waits.
func holdAuthor(t *testing.T, remote *repotest.Remote, author string) (release func(), held func() bool) {
	t.Helper()
	dir := t.TempDir()
	block, arrived := filepath.Join(dir, "hold"), filepath.Join(dir, "arrived")
	require.NoError(t, os.WriteFile(block, nil, 0o644))
	onPushBy(t, remote, author, "touch '"+arrived+"'; while [ -f '"+block+"' ]; do sleep 0.05; done")
	release = func() { _ = os.Remove(block) }
	t.Cleanup(release) // before the server stops, or its push never ends
	return release, func() bool { _, err := os.Stat(arrived); return err == nil }
}

func TestARequestIsAnsweredBeforeTheNextWindowOfTheTargetIsPushed(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	remote := repotest.NewHTTPRemote(t, repotest.RefusePushesWhile(&refuse, http.StatusServiceUnavailable, "down for maintenance"))
	writer, c := liveWriter(t, remote)
	alices := alicesRelease(t, writer, c)
	require.Eventually(t, func() bool {
		out, _ := writer.Request(alices)
		return out.Reason == batch.ReasonRetrying
	}, 10*time.Second, 20*time.Millisecond, "her push failed and waits for the target's retry")
	writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "bobs", map[string]any{"k": "v"}), Author: "bob"})
	_, err := writer.Request(batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "bobs-release"}, Target: targetKey,
		Author: "bob", Message: "bob's release", Deadline: time.Now().Add(time.Minute)})
	require.NoError(t, err)
	release, _ := holdAuthor(t, remote, "bob")
	refuse.Store(false) // the retry pushes her window, then his, which the server holds

	out := outcomeOf(t, writer, alices, "alice hears of her commit while bob's push still waits")
	assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
	assert.Equal(t, remote.Head("main"), out.SHA)
	assert.NotContains(t, remote.LsTree("main"), "bobs.yaml", "his push was still held")
	release()
	require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "configmaps/bobs.yaml") },
		10*time.Second, 20*time.Millisecond, "his window lands once the server lets it")
}

// quietWriter is liveWriter with windows closing after quiet.
func quietWriter(t *testing.T, remote *repotest.Remote, quiet time.Duration) (*batch.Manager, *cluster) {
	t.Helper()
	remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	writer, c := startWriter(t)
	spec := targetSpec(t, "live", remote.URL, nil)
	spec.Window.Quiet = quiet
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	return writer, c
}

func TestATemplateThatFailsAtACommitIsNamedInStatusUntilOneRenders(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	writer, c := startWriter(t)
	spec := targetSpec(t, "live", remote.URL, nil)
	msgs, err := batch.ParseMessages("", "{{if gt (len .Changes) 2}}{{index .Changes 9}}{{end}}{{.Target}} group")
	require.NoError(t, err, "two sample changes pass")
	spec.Messages, spec.Window.Quiet = msgs, 100*time.Millisecond
	_, err = writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	submit := func(names ...string) {
		var changes []batch.Change
		for _, n := range names {
			changes = append(changes, batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", n, map[string]any{"k": "v"}), Author: "alice"})
		}
		before := len(remote.Log("main"))
		writer.Submit(changes...)
		require.Eventually(t, func() bool { return len(remote.Log("main")) > before }, 10*time.Second, 20*time.Millisecond)
	}

	submit("a", "b", "c")
	st, _ := writer.Status(targetKey)
	assert.Contains(t, st.MessageFallback, "the last commit's message template failed, so it has the default message: ")
	assert.Contains(t, st.MessageFallback, "index")
	assert.Contains(t, remote.Log("main")[0], "ops/live: 3 changes by alice")

	submit("d", "e")
	st, _ = writer.Status(targetKey)
	assert.Empty(t, st.MessageFallback, "the template rendered")
	assert.Contains(t, remote.Log("main")[0], "ops/live group")
}

func TestARequestHandedOverWhileItsAuthorsClosedWindowWaitsItsTurnRidesIt(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	writer, c := quietWriter(t, remote, 100*time.Millisecond)
	release, held := holdAuthor(t, remote, "alice")
	// One hand-over: both windows close together, alice's (older by name) pushed first.
	writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "alices", map[string]any{"k": "v"}), Author: "alice"},
		batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "zoes", map[string]any{"k": "v"}), Author: "zoe"})
	require.Eventually(t, held, 10*time.Second, 10*time.Millisecond, "alice's push reached the server")

	// Zoe asked within her quiet period; the request reaches the writer only now, her
	// window closed and waiting behind alice's push, its commit not made yet.
	zoes := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "zoes-release"}, Target: targetKey,
		Author: "zoe", Message: "zoe's release", Deadline: time.Now().Add(3 * time.Second)}
	_, err := writer.Request(zoes)
	require.NoError(t, err)
	release()

	out := outcomeOf(t, writer, zoes, "her request is answered by the commit of her window")
	assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
	assert.Equal(t, remote.Head("main"), out.SHA)
	assert.Contains(t, remote.Log("main")[0], "zoe's release")
}

func TestARequestOnATargetThatNeverReadItsBranchSaysWhy(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	remote := repotest.NewHTTPRemote(t, repotest.DownWhile(&down))
	remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	writer, c := startWriter(t)
	spec := targetSpec(t, "live", remote.URL, nil)
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.Error(t, err, "the operator started during an outage")
	req := alicesRelease(t, writer, c)

	var out batch.RequestOutcome
	require.Eventually(t, func() bool {
		out, _ = writer.Request(req)
		return out.Reason == batch.ReasonRetrying
	}, 10*time.Second, 20*time.Millisecond, "not Waiting for changes that arrived")
	assert.False(t, out.Done)
	assert.Contains(t, out.Message, "could not read its branch yet")
	assert.Contains(t, out.Message, "503")

	down.Store(false)
	_, err = writer.EnsureTarget(context.Background(), spec) // the GitTarget's next reconcile
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		out, _ = writer.Request(req)
		return out.Done
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
	assert.Contains(t, remote.Log("main")[0], "release 1.2")
}

// lostAnswerThenDown is a remote that, while phase is 1, takes a push and loses its answer,
// and is then down (phase 2) until the test sets phase to 0.
func lostAnswerThenDown(t *testing.T, phase *atomic.Int32) *repotest.Remote {
	t.Helper()
	return repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case loseAnswer(phase, next, w, r):
				return
			case phase.Load() == 2:
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
}

// aReleaseInDoubt is alice's release on a remote that took its push and lost the answer,
// and is down since (phase 2): her request waits, Retrying, to learn whether it landed.
func aReleaseInDoubt(t *testing.T) (remote *repotest.Remote, writer *batch.Manager, req batch.CommitRequest, phase *atomic.Int32) {
	t.Helper()
	phase = &atomic.Int32{} // 1: lose the push's answer; 2: then the remote is down
	remote = lostAnswerThenDown(t, phase)
	writer, c := liveWriter(t, remote)
	phase.Store(1)
	req = alicesRelease(t, writer, c)
	require.Eventually(t, func() bool {
		out, _ := writer.Request(req)
		return out.Reason == batch.ReasonRetrying
	}, 10*time.Second, 20*time.Millisecond, "the push is in doubt: the remote cannot be asked")
	return remote, writer, req, phase
}

func TestACommitRequestOfATargetDeletedWhileItsPushIsInDoubtSaysWhichCommit(t *testing.T) {
	remote, writer, req, _ := aReleaseInDoubt(t)

	writer.RemoveTarget(targetKey) // deleted during the backoff

	out, err := writer.Request(req)
	require.NoError(t, err)
	require.True(t, out.Done)
	assert.Equal(t, batch.ReasonTargetRemoved, out.Reason)
	assert.Contains(t, out.Message, remote.Head("main")[:7], "names the commit that did land, so its author can find it")
}

func TestAListedChangeOfAnObjectWhoseWindowWasPushedGoesToTheCommitter(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	remote := repotest.NewHTTPRemote(t, repotest.RefusePushesWhile(&refuse, http.StatusServiceUnavailable, "down for maintenance"))
	writer, c := quietWriter(t, remote, 200*time.Millisecond)
	release, held := holdAuthor(t, remote, "bob")
	writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}), Author: "alice"})
	time.Sleep(50 * time.Millisecond) // hers is the older window
	writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "bobs", map[string]any{"k": "v"}), Author: "bob"})
	require.Eventually(t, func() bool {
		st, _ := writer.Status(targetKey)
		return st.LastError != ""
	}, 10*time.Second, 20*time.Millisecond)
	refuse.Store(false) // the retry pushes her window, then his, which the server holds
	require.Eventually(t, func() bool { return held() && strings.Contains(remote.LsTree("main"), "configmaps/app.yaml") },
		10*time.Second, 20*time.Millisecond, "her window is delivered, and his push is held")

	// Someone the webhook did not see changes her object; a list finds it while his push waits.
	app := c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "changed unseen"})
	writer.Submit(batch.Change{Target: targetKey, Key: app, Relisted: true})
	release()
	var author string
	require.Eventually(t, func() bool {
		log, _ := repotest.RunGit(t, remote.Dir, "log", "--format=%an %s", "main", "--", "live/app/configmaps/app.yaml")
		lines := strings.Split(strings.TrimSpace(log), "\n")
		author = lines[0]
		return len(lines) == 2
	}, 10*time.Second, 50*time.Millisecond, "the unseen change is committed")
	assert.True(t, strings.HasPrefix(author, "Writer "), "by the committer: her change was delivered, this one is not hers: %s", author)
}

// aPipelinesSecondRun is a pipeline's first run, its request "release" with the message
// "release 1.2" committed (out), and a new process (second) with that target registered,
// to which the next run's requests, created at created, after that commit, are handed.
func aPipelinesSecondRun(t *testing.T) (out batch.RequestOutcome, second *batch.Manager, created time.Time) {
	t.Helper()
	remote := repotest.NewHTTPRemote(t)
	first, c := liveWriter(t, remote)
	out = outcomeOf(t, first, alicesRelease(t, first, c), "the first run's commit")
	require.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
	time.Sleep(50 * time.Millisecond)
	created = time.Now()

	second, _ = startWriter(t)
	_, err := second.EnsureTarget(context.Background(), targetSpec(t, "live", remote.URL, nil))
	require.NoError(t, err)
	return out, second, created
}

// A pipeline that asks with the same message each run: its next request, created within
// lookBack's minute of clock skew after the last one's commit, is handed to a new process.
func TestARequestIsNotAnsweredWithACommitAnotherRequestReports(t *testing.T) {
	out, second, created := aPipelinesSecondRun(t)
	run := func(name string, claimed func() (map[types.NamespacedName]batch.Claim, error)) batch.CommitRequest {
		r := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: name}, Target: targetKey, Author: "alice",
			Message: "release 1.2", Deadline: time.Now().Add(time.Minute), Created: created, Claimed: claimed}
		_, err := second.Request(r)
		require.NoError(t, err)
		return r
	}
	next := run("release-2", func() (map[types.NamespacedName]batch.Claim, error) { // the first run's request reports it
		return map[types.NamespacedName]batch.Claim{{Namespace: "ops", Name: "release"}: {SHA: out.SHA, Message: "release 1.2"}}, nil
	})
	// Handed over after next, it searches the branch no sooner; no request reports the commit
	// it finds, which it takes, as a request whose status an earlier process never wrote.
	unclaimed := run("release-3", nil)

	found := outcomeOf(t, second, unclaimed, "the unclaimed request is answered from the branch")
	require.Equal(t, out.SHA, found.SHA)
	waiting, err := second.Request(next)
	require.NoError(t, err)
	assert.False(t, waiting.Done, "it waits for her next change: %s", waiting.Message)
}

// The controller could not list the target's other requests when the writer first looked
// (its cache not readable yet): that look tells nothing, since the commit it finds may be
// another request's, and it is made again once they can be listed.
func TestARequestWhoseOtherRequestsCannotBeListedLooksAgain(t *testing.T) {
	out, second, created := aPipelinesSecondRun(t)
	var listed atomic.Int32
	next := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release-2"}, Target: targetKey, Author: "alice",
		Message: "release 1.2", Deadline: time.Now().Add(time.Minute), Created: created,
		Claimed: func() (map[types.NamespacedName]batch.Claim, error) {
			if listed.Add(1) == 1 {
				return nil, errors.New("the cache is not readable yet")
			}
			return map[types.NamespacedName]batch.Claim{{Namespace: "ops", Name: "release"}: {SHA: out.SHA, Message: "release 1.2"}}, nil
		}}
	_, err := second.Request(next)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return listed.Load() >= 2 }, 10*time.Second, 20*time.Millisecond,
		"it looks again, rather than taking the first run's commit")
	assert.Never(t, func() bool {
		waiting, err := second.Request(next)
		return err != nil || waiting.Done
	}, time.Second, 50*time.Millisecond, "the first run's request reports the commit: it waits for her next change")
}

// Requests of one requester with one message, not answered when the process stopped,
// handed to the next one: a commit carries the message once for each request it was made
// for, and is the answer of no more requests than that.
func TestRequestsWithOneMessageAreAnsweredByACommitOnlyAsOftenAsItCarriesIt(t *testing.T) {
	staging := types.NamespacedName{Namespace: "ops", Name: "staging"}
	request := func(target types.NamespacedName, name, message string) batch.CommitRequest {
		return batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: name}, Target: target, Author: "alice",
			Message: message, Deadline: time.Now().Add(time.Minute), Created: time.Now()}
	}
	// earlier is the process that stops, with targets live and staging on one remote.
	earlier := func(t *testing.T) (*repotest.Remote, *batch.Manager, *cluster) {
		t.Helper()
		remote := repotest.NewHTTPRemote(t)
		first, c := liveWriter(t, remote)
		_, err := first.EnsureTarget(context.Background(), targetSpec(t, "staging", remote.URL, nil))
		require.NoError(t, err)
		return remote, first, c
	}
	// commit has alice change an object of the requests' target, which all ride her window,
	// and returns their commit.
	commit := func(t *testing.T, w *batch.Manager, c *cluster, requests ...batch.CommitRequest) string {
		t.Helper()
		target := requests[0].Target
		w.Submit(batch.Change{Target: target, Key: c.put(cmGVR, "ConfigMap", target.Name, map[string]any{"k": requests[0].Key.Name}), Author: "alice"})
		for _, r := range requests {
			_, err := w.Request(r)
			require.NoError(t, err)
		}
		sha := ""
		for _, r := range requests {
			out := outcomeOf(t, w, r, "the earlier process's commit")
			require.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
			require.True(t, sha == "" || sha == out.SHA, "one window, one commit")
			sha = out.SHA
		}
		return sha
	}
	// handOver starts the next process, which never saw the requests, and hands them over
	// in order, then the probe, a request of the same target with another message, created
	// and committed last: once it is answered from the branch, every request before it has
	// looked (a pass looks for a target's requests oldest first, and reports at its end).
	handOver := func(t *testing.T, remote *repotest.Remote, probe batch.CommitRequest, requests ...batch.CommitRequest) *batch.Manager {
		t.Helper()
		next, _ := startWriter(t)
		for _, folder := range []string{"live", "staging"} {
			_, err := next.EnsureTarget(context.Background(), targetSpec(t, folder, remote.URL, nil))
			require.NoError(t, err)
		}
		for _, r := range append(requests, probe) {
			r.Deadline = time.Now().Add(time.Minute)
			_, err := next.Request(r)
			require.NoError(t, err)
		}
		require.Equal(t, batch.ReasonCommitted, outcomeOf(t, next, probe, "the probe looked last").Reason)
		return next
	}
	// aSecondLater waits for the next second: Git and Kubernetes keep times to the second,
	// and a request created in the second of a commit may have been its own.
	aSecondLater := func() { time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) }
	answers := func(t *testing.T, next *batch.Manager, requests ...batch.CommitRequest) []string {
		t.Helper()
		var shas []string
		for _, r := range requests {
			out, err := next.Request(r)
			require.NoError(t, err)
			shas = append(shas, out.SHA) // empty: waiting for her next change
		}
		return shas
	}

	t.Run("answers the older request with a commit that carries the message once, and the newer waits", func(t *testing.T) {
		remote, first, c := earlier(t)
		older := request(targetKey, "release", "release 1.2")
		x := commit(t, first, c, older)
		aSecondLater()
		newer := request(targetKey, "release-again", "release 1.2") // after that commit, within the clock skew
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, older, newer)

		assert.Equal(t, []string{x, ""}, answers(t, next, older, newer))
	})
	t.Run("answers each request with its own commit, the older the older", func(t *testing.T) {
		remote, first, c := earlier(t)
		older := request(targetKey, "release", "release 1.2")
		x1 := commit(t, first, c, older)
		aSecondLater()
		newer := request(targetKey, "release-again", "release 1.2")
		x2 := commit(t, first, c, newer)
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, older, newer)

		assert.Equal(t, []string{x1, x2}, answers(t, next, older, newer), "not the newest commit for the oldest request")
	})
	t.Run("answers a request handed over after the first one's answer, not written yet, took the commit", func(t *testing.T) {
		remote, first, c := earlier(t)
		older := request(targetKey, "release", "release 1.2")
		x := commit(t, first, c, older)
		aSecondLater()
		newer := request(targetKey, "release-again", "release 1.2")
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, older)
		require.Equal(t, []string{x}, answers(t, next, older))
		// A probe again, under another name: the first one's claim leaves with it.
		next.Forget(probe.Key)
		probe.Key.Name = "probe-again"
		for _, r := range []batch.CommitRequest{newer, probe} { // the cache shows no status of the older one yet
			_, err := next.Request(r)
			require.NoError(t, err)
		}
		require.Equal(t, batch.ReasonCommitted, outcomeOf(t, next, probe, "the probe looked last").Reason)

		assert.Equal(t, []string{""}, answers(t, next, newer), "the writer's own answer claims the commit")
	})
	t.Run("answers both with a commit that carries the message twice", func(t *testing.T) {
		remote, first, c := earlier(t)
		one, two := request(targetKey, "release", "release 1.2"), request(targetKey, "release-again", "release 1.2")
		x := commit(t, first, c, one, two)
		require.Contains(t, repotest.Git(t, remote.Dir, "log", "-1", "--format=%B", "main"), "release 1.2\n\nrelease 1.2", "the message once for each request")
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, one, two)

		assert.Equal(t, []string{x, x}, answers(t, next, one, two))
		assert.Len(t, remote.Log("main"), 3, "the seed, the one commit and the probe's: the message is not committed again")
	})
	t.Run("leaves the copy of a message that another request's message holds as a paragraph", func(t *testing.T) {
		remote, first, c := earlier(t)
		short, long := request(targetKey, "release", "release 1.2"), request(targetKey, "release-notes", "release 1.2\n\nnotes")
		x := commit(t, first, c, short, long)
		again := request(targetKey, "release-again", "release 1.2")
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)
		// The two report the commit; a request not answered when the process stopped looks.
		again.Claimed = func() (map[types.NamespacedName]batch.Claim, error) {
			return map[types.NamespacedName]batch.Claim{short.Key: {SHA: x, Message: short.Message}, long.Key: {SHA: x, Message: long.Message}}, nil
		}

		next := handOver(t, remote, probe, again)

		assert.Equal(t, []string{""}, answers(t, next, again), "both copies in the commit are taken")
	})
	t.Run("leaves another target's commit on the branch", func(t *testing.T) {
		remote, first, c := earlier(t)
		commit(t, first, c, request(targetKey, "release", "release 1.2"))
		mine := request(staging, "release-staging", "release 1.2") // her pipeline asks of both targets
		probe := request(staging, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, mine)

		assert.Equal(t, []string{""}, answers(t, next, mine), "the commit carries live's request's message, not hers")
	})
	t.Run("leaves another target's commit at the tip of a fresh clone", func(t *testing.T) {
		remote, first, c := earlier(t)
		mine := request(targetKey, "release", "release 1.2") // the stop comes before live's window
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)
		commit(t, first, c, request(staging, "release-staging", "release 1.2")) // her pipeline asks of both targets

		next := handOver(t, remote, probe, mine)

		assert.Equal(t, []string{""}, answers(t, next, mine), "the tip carries staging's request's message, not hers")
	})
	t.Run("answers the older request with its own commit when the newer one's is the tip", func(t *testing.T) {
		remote, first, c := earlier(t)
		older := request(targetKey, "release", "release 1.2")
		x1 := commit(t, first, c, older)
		aSecondLater()
		newer := request(targetKey, "release-again", "release 1.2")
		x2 := commit(t, first, c, newer)

		next, _ := startWriter(t)
		_, err := next.EnsureTarget(context.Background(), targetSpec(t, "live", remote.URL, nil))
		require.NoError(t, err)
		for _, r := range []batch.CommitRequest{older, newer} {
			r.Deadline = time.Now().Add(time.Minute)
			_, err := next.Request(r)
			require.NoError(t, err)
		}

		assert.Equal(t, x1, outcomeOf(t, next, older, "the older request is answered from the branch").SHA)
		assert.Equal(t, x2, outcomeOf(t, next, newer, "the newer request is answered from the branch").SHA)
	})
	t.Run("takes the commit made since it, not one made just before for a request deleted since", func(t *testing.T) {
		remote, first, c := earlier(t)
		commit(t, first, c, request(targetKey, "release", "release 1.2")) // the previous run's, deleted with its request
		aSecondLater()
		mine := request(targetKey, "release-next", "release 1.2")
		x := commit(t, first, c, mine)
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, mine)

		assert.Equal(t, []string{x}, answers(t, next, mine))
	})
	t.Run("leaves a commit made before it to an older request still waiting that looks later", func(t *testing.T) {
		remote, first, c := earlier(t)
		older := request(targetKey, "release", "release 1.2")
		x := commit(t, first, c, older)
		aSecondLater()
		newer := request(targetKey, "release-again", "release 1.2") // after that commit, within the clock skew
		// Its controller lists the older one, not settled; the writer has not been handed it.
		newer.Claimed = func() (map[types.NamespacedName]batch.Claim, error) {
			return map[types.NamespacedName]batch.Claim{older.Key: {Message: older.Message, Created: older.Created}}, nil
		}
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, newer)
		require.Equal(t, []string{""}, answers(t, next, newer))

		older.Deadline = time.Now().Add(time.Minute)
		_, err := next.Request(older)
		require.NoError(t, err)
		assert.Equal(t, x, outcomeOf(t, next, older, "the older request is answered from the branch").SHA)
	})
	t.Run("answers each request with its own commit when the newer looks first", func(t *testing.T) {
		remote, first, c := earlier(t)
		older := request(targetKey, "release", "release 1.2")
		x1 := commit(t, first, c, older)
		aSecondLater()
		newer := request(targetKey, "release-again", "release 1.2")
		x2 := commit(t, first, c, newer)
		probe := request(targetKey, "probe", "probe")
		commit(t, first, c, probe)

		next := handOver(t, remote, probe, newer)
		require.Equal(t, []string{x2}, answers(t, next, newer))
		older.Deadline = time.Now().Add(time.Minute)
		_, err := next.Request(older)
		require.NoError(t, err)

		assert.Equal(t, x1, outcomeOf(t, next, older, "the older request is answered from the branch").SHA)
	})
}

// Windows live in memory: a request whose change had come (TargetStalled, past its
// timeout's reach) is handed to the next process with no change pending, and times out.
func TestARequestThatTimesOutAfterARestartSaysSo(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	created := time.Now().Add(-2 * time.Minute)
	writer, _ := liveWriter(t, remote)
	req := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: targetKey, Author: "alice",
		Message: "release 1.2", Deadline: created.Add(time.Minute), Created: created}
	_, err := writer.Request(req)
	require.NoError(t, err)

	out := outcomeOf(t, writer, req, "its deadline passed")
	assert.Equal(t, batch.ReasonTimedOut, out.Reason)
	assert.Contains(t, out.Message, "the operator restarted")
	assert.Contains(t, out.Message, "initial snapshot")
}

// A kill right after a push leaves the CommitRequest's status unwritten; the next process
// is handed it again. Another writer on the same remote stands for that process.
func TestARequestAnEarlierProcessCommittedIsAnsweredFromTheBranch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		onTop    int // commits people push on hers before the next process starts
		wantLogs int
	}{
		{"answers it when its commit is the branch's tip", 0, 2},
		{"answers it when people pushed on its commit before the next process fetched", 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := repotest.NewHTTPRemote(t)
			first, c := liveWriter(t, remote)
			created := time.Now().Add(-time.Second)
			req := alicesRelease(t, first, c)
			out := outcomeOf(t, first, req, "her commit")
			require.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
			for i := range tc.onTop {
				remote.Seed("main", map[string]string{fmt.Sprintf("notes/%d.md", i): "note\n"}, "a person's commit")
			}

			second, _ := startWriter(t) // the next process, which never saw the request
			_, err := second.EnsureTarget(context.Background(), targetSpec(t, "live", remote.URL, nil))
			require.NoError(t, err)
			req.Created = created
			other := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "other"}, Target: targetKey, Author: "alice",
				Message: "a message no commit has", Deadline: time.Now().Add(time.Minute), Created: created}
			_, err = second.Request(other)
			require.NoError(t, err)
			_, err = second.Request(req)
			require.NoError(t, err)

			again := outcomeOf(t, second, req, "without a change of hers")
			assert.Equal(t, batch.ReasonCommitted, again.Reason, again.Message)
			assert.Equal(t, out.SHA, again.SHA)
			waiting, err := second.Request(other)
			require.NoError(t, err)
			assert.False(t, waiting.Done, "a message the branch does not have waits for her next change, as before")
			assert.Len(t, remote.Log("main"), tc.wantLogs, "the seed, her one commit and the people's")
		})
	}
}

func TestARequestMadeBeforeTheWriterStartedWaitsForItsTargetToRegister(t *testing.T) {
	before := time.Now()
	start := func(gitTimeout time.Duration) *batch.Manager {
		writer := batch.NewManager(batch.Options{Resolver: &cluster{}, Log: logr.Discard(), WorkDir: t.TempDir(), GitTimeout: gitTimeout})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = writer.Start(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		require.Eventually(t, writer.Leading, 10*time.Second, time.Millisecond)
		return writer
	}
	request := func(created time.Time) batch.CommitRequest {
		return batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, UID: "1",
			Target: types.NamespacedName{Namespace: "ops", Name: "live"}, Author: "alice", Message: "release 1.2",
			Created: created, Deadline: created.Add(time.Second)}
	}
	t.Run("an earlier leader may have committed it: the writer has not looked yet", func(t *testing.T) {
		_, err := start(time.Minute).Request(request(before))
		require.ErrorIs(t, err, batch.ErrRecovering)
		assert.ErrorIs(t, err, batch.ErrTargetNotRegistered)
	})
	t.Run("made after the start, it is only not registered", func(t *testing.T) {
		writer := start(time.Minute)
		_, err := writer.Request(request(time.Now().Add(time.Minute)))
		require.ErrorIs(t, err, batch.ErrTargetNotRegistered)
		assert.NotErrorIs(t, err, batch.ErrRecovering)
	})
	t.Run("two Git timeouts after the start, the writer waits no more", func(t *testing.T) {
		_, err := start(time.Nanosecond).Request(request(before))
		require.ErrorIs(t, err, batch.ErrTargetNotRegistered)
		assert.NotErrorIs(t, err, batch.ErrRecovering)
	})
}

// A request made before this process started is handed to it while another request of its
// requester, with its message, waits to learn whether its push landed (the answer lost, the
// remote unreachable to check). Once the remote is back, the request looks on the branch
// before that retry runs: the commit it finds there, with the message, is the other's.
func TestARequestDoesNotTakeTheCommitOfAnotherWhosePushIsInDoubt(t *testing.T) {
	created := time.Now().Add(-time.Second) // before the writer starts
	remote, writer, inDoubt, phase := aReleaseInDoubt(t)
	// The retries fail, and back off to four seconds; the GitTarget's reconcile, below,
	// fetches again once five seconds have passed since the last fetch.
	time.Sleep(5500 * time.Millisecond)
	phase.Store(0)
	_, err := writer.EnsureTarget(context.Background(), targetSpec(t, "live", remote.URL, nil)) // the GitTarget's next reconcile
	require.NoError(t, err, "it fetches the branch, with the commit")
	earlier := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release-before-the-restart"}, Target: targetKey,
		Author: "alice", Message: "release 1.2", Deadline: time.Now().Add(time.Minute), Created: created}
	_, err = writer.Request(earlier)
	require.NoError(t, err, "it looks on the branch before the retry runs")
	out := outcomeOf(t, writer, inDoubt, "the retry finds its commit on the remote")
	require.Equal(t, batch.ReasonCommitted, out.Reason, out.Message)
	require.Equal(t, remote.Head("main"), out.SHA)
	assert.Never(t, func() bool {
		got, err := writer.Request(earlier)
		return err != nil || got.SHA == out.SHA
	}, time.Second, 50*time.Millisecond, "the commit carries the message once, for the request whose push made it")
}
