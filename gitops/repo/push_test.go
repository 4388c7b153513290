package repo_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestFirstPushToAnEmptyRepositoryCreatesTheBranch(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	r := openClone(t, remote.URL, nil)

	tip := fetch(t, r, "main")
	require.Equal(t, plumbing.ZeroHash, tip, "an empty remote has no tip")

	c := commit(t, r, tip, files("live/team-a/configmaps/app.yaml", "kind: ConfigMap\n"), "add app")
	push(t, r, "main", c, plumbing.ZeroHash)

	assert.Equal(t, c.String(), remote.Head("main"))
	assert.Equal(t, "kind: ConfigMap", remote.Show("main", "live/team-a/configmaps/app.yaml"))
	assert.Equal(t, c, fetch(t, r, "main"), "fetch sees the pushed tip")
	remote.Fsck()
}

func TestPushWorksOverFileURLs(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	r := openClone(t, remote.URL, nil)

	c1 := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")
	push(t, r, "main", c1, plumbing.ZeroHash)
	c2 := commit(t, r, c1, files("b/c.yaml", "c: 1\n"), "two")
	push(t, r, "main", c2, c1)

	assert.Equal(t, c2.String(), remote.Head("main"))
	assert.Len(t, remote.Log("main"), 2)
	remote.Fsck()
}

func TestPushReturnsErrRemoteMovedWhenAnotherClonePushedAndKeepsTheirCommit(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	base := remote.PushFiles("main", map[string]string{"live/a.yaml": "a: 1\n"}, "base")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	require.Equal(t, base, tip.String())

	mine := commit(t, r, tip, files("live/b.yaml", "b: 1\n"), "mine")
	theirs := remote.PushFiles("main", map[string]string{"live/c.yaml": "c: 1\n"}, "theirs")

	err := r.Push(context.Background(), "main", mine, tip)
	require.ErrorIs(t, err, repo.ErrRemoteMoved)
	assert.Equal(t, theirs, remote.Head("main"), "the other writer's commit survives")

	newTip := fetch(t, r, "main")
	require.Equal(t, theirs, newTip.String())
	replayed := commit(t, r, newTip, files("live/b.yaml", "b: 1\n"), "mine, replayed")
	push(t, r, "main", replayed, newTip)

	log := remote.Log("main")
	require.Len(t, log, 3)
	assert.True(t, strings.HasPrefix(log[0], replayed.String()))
	assert.True(t, strings.HasPrefix(log[1], theirs))
	assert.Equal(t, "c: 1", remote.Show("main", "live/c.yaml"))
	assert.Equal(t, "b: 1", remote.Show("main", "live/b.yaml"))
	remote.Fsck()
}

func TestPushLosesTheRaceWhenTheRemoteMovesBetweenAdvertisementAndUpdate(t *testing.T) {
	var theirs string
	var remote *repotest.Remote
	remote = repotest.NewHTTPRemote(t, repotest.BeforeFirstPush(func() {
		theirs = remote.PushFiles("main", map[string]string{"x.yaml": "x: 1\n"}, "theirs, mid-push")
	}))
	base := remote.Seed("main", map[string]string{"a.yaml": "a: 1\n"}, "base")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	require.Equal(t, base, tip.String())

	mine := commit(t, r, tip, files("b.yaml", "b: 1\n"), "mine")
	err := r.Push(context.Background(), "main", mine, tip)

	// The advertisement still showed tip; the server refused the update because
	// the ref no longer held the old value sent with it.
	require.ErrorIs(t, err, repo.ErrRemoteMoved, "the server's compare-and-swap rejects the stale update")
	assert.ErrorIs(t, err, repo.ErrNotSent, "a declined update never landed: nothing to look for later")
	require.NotEmpty(t, theirs)
	assert.Equal(t, theirs, remote.Head("main"))
	remote.Fsck()
}

func TestARaceLostWhenTheRemoteCannotBeLookedAtAgainIsNoDecline(t *testing.T) {
	var remote *repotest.Remote
	var lookFails atomic.Bool
	remote = repotest.NewHTTPRemote(t, repotest.BeforeFirstPush(func() {
		remote.PushFiles("main", map[string]string{"x.yaml": "x: 1\n"}, "theirs, mid-push")
		lookFails.Store(true) // the look at the remote that follows the declined update fails
	}), repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("service") == "git-upload-pack" && lookFails.CompareAndSwap(true, false) {
				http.Error(w, "try again later", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	remote.Seed("main", map[string]string{"a.yaml": "a: 1\n"}, "base")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	mine := commit(t, r, tip, files("b.yaml", "b: 1\n"), "mine")

	err := r.Push(context.Background(), "main", mine, tip)

	require.ErrorIs(t, err, repo.ErrMaybeMoved, "the server's compare-and-swap declined it; why could not be told")
	assert.ErrorIs(t, err, repo.ErrNotSent, "a declined update never landed")
	assert.NotErrorIs(t, err, repo.ErrRejected, "not handled as the server's rule")
	assert.NotContains(t, err.Error(), "protected branch", "no hint that sends the user after the wrong cause")
	assert.False(t, lookFails.Load(), "the look was made and failed")
}

func TestPushExpectingNoBranchFailsWhenTheBranchExists(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	theirs := remote.PushFiles("main", map[string]string{"a.yaml": "a: 1\n"}, "theirs")
	r := openClone(t, remote.URL, nil)

	mine := commit(t, r, plumbing.ZeroHash, files("b.yaml", "b: 1\n"), "mine")
	err := r.Push(context.Background(), "main", mine, plumbing.ZeroHash)

	require.ErrorIs(t, err, repo.ErrRemoteMoved)
	assert.Equal(t, theirs, remote.Head("main"))
}

func TestPushCreatesANewBranchBesideExistingOnes(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	mainTip := remote.PushFiles("main", map[string]string{"a.yaml": "a: 1\n"}, "main")
	r := openClone(t, remote.URL, nil)
	require.Equal(t, plumbing.ZeroHash, fetch(t, r, "mirror"))

	c := commit(t, r, plumbing.ZeroHash, files("live/x.yaml", "x: 1\n"), "first mirror commit")
	push(t, r, "mirror", c, plumbing.ZeroHash)

	assert.Equal(t, c.String(), remote.Head("mirror"))
	assert.Equal(t, mainTip, remote.Head("main"))
	remote.Fsck()
}

func TestPushRefusesACommitThatDoesNotDescendFromTheExpectedTip(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	r := openClone(t, remote.URL, nil)
	c1 := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")
	push(t, r, "main", c1, plumbing.ZeroHash)

	unrelated := commit(t, r, plumbing.ZeroHash, files("b.yaml", "b: 1\n"), "unrelated root")
	err := r.Push(context.Background(), "main", unrelated, c1)

	require.ErrorIs(t, err, repo.ErrNotFastForward)
	assert.Equal(t, c1.String(), remote.Head("main"))
}

func TestPushOfTheTipTheRemoteAlreadyHasSucceeds(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	r := openClone(t, remote.URL, nil)
	c := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")
	push(t, r, "main", c, plumbing.ZeroHash)

	push(t, r, "main", c, plumbing.ZeroHash) // a retry after a lost answer
	assert.Equal(t, c.String(), remote.Head("main"))
}

func TestPushUpdatesTheRemoteTrackingRef(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	r := openClone(t, remote.URL, nil)
	c := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")
	push(t, r, "main", c, plumbing.ZeroHash)

	got := repotest.Git(t, r.Dir(), "rev-parse", "refs/remotes/origin/main")
	assert.Equal(t, c.String(), got)
}

func TestPushSendsOnlyTheObjectsOfTheChange(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	repotest.Git(t, remote.Dir, "config", "receive.unpackLimit", "1000") // keep pushed objects loose, countable
	r := openClone(t, remote.URL, nil)
	many := map[string][]byte{}
	for _, ns := range []string{"a", "b", "c"} {
		for _, n := range []string{"1", "2", "3"} {
			many["live/"+ns+"/cm-"+n+".yaml"] = []byte(ns + n + "\n")
		}
	}
	c1 := commit(t, r, plumbing.ZeroHash, many, "many")
	push(t, r, "main", c1, plumbing.ZeroHash)
	c2 := commit(t, r, c1, files("live/b/cm-2.yaml", "changed\n"), "one file")
	push(t, r, "main", c2, c1)

	first := 1 + 1 + 1 + 3 + 9 // commit, root, live, three folders, nine blobs
	second := 1 + 3 + 1        // commit, root/live/live/b trees, one blob
	assert.Equal(t, first+second, countLooseObjects(t, remote.Dir), "the second push carries only the change")
	remote.Fsck()
}

func TestTheCloneStoresTheVeryPackAPushOfManyObjectsSent(t *testing.T) {
	remote := repotest.NewFileRemote(t) // git keeps a pack of 100 objects or more as it came
	r := openClone(t, remote.URL, nil)
	many := map[string][]byte{}
	for i := range 200 {
		many[fmt.Sprintf("live/team-a/configmaps/cm-%03d.yaml", i)] = fmt.Appendf(nil,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\ndata:\n  key: value-%d\n", i, i)
	}
	c := commit(t, r, plumbing.ZeroHash, many, "many")
	push(t, r, "main", c, plumbing.ZeroHash)

	sent := packNames(t, remote.Dir)
	require.Len(t, sent, 1, "the remote kept the pushed pack")
	assert.Equal(t, sent, packNames(t, r.Dir()), "the clone stored the same pack, not one compressed again")
	out, err := repotest.RunGit(t, r.Dir(), "fsck", "--full", "--strict", "--no-dangling", "--no-progress")
	require.NoError(t, err, out)
	assert.Contains(t, repotest.Git(t, r.Dir(), "show", c.String()+":live/team-a/configmaps/cm-007.yaml"), "name: cm-007")
}

// packNames lists the packfiles of a repository's object store by name.
func packNames(t *testing.T, gitDir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.pack"))
	require.NoError(t, err)
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

func countLooseObjects(t *testing.T, bare string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(bare, "objects"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(bare, "objects"), p)
		if !d.IsDir() && len(filepath.Dir(rel)) == 2 {
			n++
		}
		return nil
	})
	require.NoError(t, err)
	return n
}

func TestPushAfterContextCancellationFails(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	r := openClone(t, remote.URL, nil)
	c := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	err := r.Push(ctx, "main", c, plumbing.ZeroHash)
	require.Error(t, err)
	assert.Empty(t, remote.Head("main"))
}

// emptyReceivePackAnswer makes the server answer a push with an empty body, after passing
// it to git (forward) or without (a proxy that dropped it): the answer go-git reads as no
// report and no error.
func emptyReceivePackAnswer(forward bool) repotest.Option {
	return repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !repotest.IsReceivePack(r) {
				next.ServeHTTP(w, r)
				return
			}
			if forward {
				next.ServeHTTP(httptest.NewRecorder(), r)
			} else {
				_, _ = io.Copy(io.Discard, r.Body)
			}
			w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
			w.WriteHeader(http.StatusOK)
		})
	})
}

func TestAPushTheRemoteDoesNotReportOnIsDeliveredOnlyWhenTheRemoteHasIt(t *testing.T) {
	t.Run("fails when the update never reached the repository", func(t *testing.T) {
		remote := repotest.NewHTTPRemote(t, emptyReceivePackAnswer(false))
		r := openClone(t, remote.URL, nil)
		c := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")

		err := r.Push(context.Background(), "main", c, plumbing.ZeroHash)

		require.Error(t, err)
		assert.Contains(t, err.Error(), "did not report")
		assert.Empty(t, remote.Head("main"))
	})
	t.Run("succeeds when the update landed", func(t *testing.T) {
		remote := repotest.NewHTTPRemote(t, emptyReceivePackAnswer(true))
		r := openClone(t, remote.URL, nil)
		c := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")

		require.NoError(t, r.Push(context.Background(), "main", c, plumbing.ZeroHash))
		assert.Equal(t, c.String(), remote.Head("main"))
	})
}

func TestAPushWhoseDeadlinePassesAfterTheRemoteTookItIsDelivered(t *testing.T) {
	// The server stores the update, then does not answer until the client gives up.
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !repotest.IsReceivePack(r) {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		})
	}))
	r := openClone(t, remote.URL, nil)
	c := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a: 1\n"), "one")
	// Long enough for both round trips to reach the server even on a loaded machine: the
	// deadline must pass after the update is stored, not before.
	require.NoError(t, r.PushWithin(context.Background(), 5*time.Second, "main", c, plumbing.ZeroHash))
	assert.Equal(t, c.String(), remote.Head("main"))
}

func TestAPushToARemoteThatIsDownSaysNothingWasSent(t *testing.T) {
	var down atomic.Bool
	remote := repotest.NewHTTPRemote(t, repotest.DownWhile(&down))
	remote.Seed("main", map[string]string{"live/a.yaml": "a: 1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	c := commit(t, r, tip, files("live/a.yaml", "a: 2\n"), "change")
	down.Store(true)

	err := r.Push(context.Background(), "main", c, tip)

	require.ErrorIs(t, err, repo.ErrNotSent, "the remote's refs could not be read: the update was never offered")
	assert.NotErrorIs(t, err, repo.ErrRemoteMoved)
	down.Store(false)
	assert.Equal(t, tip.String(), remote.Head("main"))
}

func TestAPushRefusedBeforeSendingToARemoteThatMovedSaysBoth(t *testing.T) {
	var refuse atomic.Bool
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if refuse.Load() && r.URL.Query().Get("service") == "git-receive-pack" {
				http.Error(w, "pushes are off for maintenance", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	remote.Seed("main", map[string]string{"live/a.yaml": "a: 1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	c := commit(t, r, tip, files("live/a.yaml", "a: 2\n"), "change")
	remote.PushFiles("main", map[string]string{"live/b.yaml": "b: 1\n"}, "a person's commit")
	refuse.Store(true)

	err := r.Push(context.Background(), "main", c, tip)

	require.ErrorIs(t, err, repo.ErrRemoteMoved, "the look that followed found the person's commit")
	assert.ErrorIs(t, err, repo.ErrNotSent, "and the commit was never offered: nothing needs to look for it")
	assert.Equal(t, 1, strings.Count(err.Error(), "nothing was sent"), err.Error())
}
