package batch

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// hidingScene is a repository whose branch main is hidden from user bob, and a writer on it
// whose targets write a folder each; rec records their requests for a snapshot.
type hidingScene struct {
	m       *Manager
	remote  *repotest.Remote
	rec     *readyRecorder
	msgs    Messages
	cluster fixedResolver // what the writer reads of the objects it commits
}

func newHidingScene(t *testing.T) *hidingScene {
	t.Helper()
	return newSceneOn(t, repotest.NewHTTPRemote(t, repotest.HideBranchFrom("bob", "main")))
}

// newSceneOn is a hidingScene on remote, seeded.
func newSceneOn(t *testing.T, remote *repotest.Remote) *hidingScene {
	t.Helper()
	remote.Seed("main", map[string]string{"live/README.md": "objects\n", "other/README.md": "objects\n"}, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	rec := &readyRecorder{}
	cluster := fixedResolver{}
	return &hidingScene{m: NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), OnFolderReady: rec.add, Resolver: cluster}),
		remote: remote, rec: rec, msgs: msgs, cluster: cluster}
}

// spec is GitTarget ops/<folder> on main, reaching the remote as user.
func (s *hidingScene) spec(folder, user string) TargetSpec {
	return TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: folder}, URL: s.remote.URL, Branch: "main",
		Folder: folder, Messages: s.msgs, Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour},
		Committer: Identity{Name: "W", Email: "w@example.com"}, Auth: &githttp.BasicAuth{Username: user, Password: "x"}}
}

// hidingRemote is a hidingScene with two targets, ops/live as alice and ops/other as bob
// (registered in that order, other's registration's error returned).
func hidingRemote(t *testing.T) (*Manager, *repotest.Remote, *readyRecorder, TargetSpec, TargetSpec, error) {
	t.Helper()
	s := newHidingScene(t)
	m, remote, rec := s.m, s.remote, s.rec
	live, other := s.spec("live", "alice"), s.spec("other", "bob")
	_, err := m.EnsureTarget(context.Background(), live)
	require.NoError(t, err)
	_, otherErr := m.EnsureTarget(context.Background(), other)
	return m, remote, rec, live, other, otherErr
}

func TestABranchHiddenFromOneTargetsCredentials(t *testing.T) {
	t.Run("fails that target's registration, and is not read as deleted for the others", func(t *testing.T) {
		m, remote, rec, live, _, err := hidingRemote(t)

		require.ErrorIs(t, err, ErrBranchHidden)
		assert.Contains(t, err.Error(), "another GitTarget's credentials see it")
		assert.NotContains(t, err.Error(), "ops/live", "another tenant's target is not named")
		assert.Equal(t, []types.NamespacedName{live.Key}, rec.got(),
			"live asked for its snapshot once, as a new target; the branch did not read as deleted")
		st, err := m.EnsureTarget(context.Background(), live)
		require.NoError(t, err)
		assert.Equal(t, remote.Head("main"), st.LastCommit.String(), "live still reads the branch at its tip")
	})

	t.Run("is still read as deleted when the credentials that saw it last no longer see it either", func(t *testing.T) {
		m, remote, rec, live, other, _ := hidingRemote(t)
		other.Auth = live.Auth // bob's provider now holds alice's credentials: other reads the branch
		_, err := m.EnsureTarget(context.Background(), other)
		require.NoError(t, err)
		live.Auth = &githttp.BasicAuth{Username: "carol", Password: "x"} // live fetches (new credentials) and saw it last
		_, err = m.EnsureTarget(context.Background(), live)
		require.NoError(t, err)
		repotest.Git(t, remote.Dir, "update-ref", "-d", "refs/heads/main")

		other.Auth = &githttp.BasicAuth{Username: "dave", Password: "x"} // other fetches with credentials live's did not
		_, err = m.EnsureTarget(context.Background(), other)

		require.NoError(t, err)
		got := rec.got()
		assert.ElementsMatch(t, []types.NamespacedName{live.Key, other.Key}, got[len(got)-2:], "each folder is written whole again")
	})

	t.Run("asks the credentials of another target when those that saw it last are gone", func(t *testing.T) {
		s := newHidingScene(t)
		ctx := context.Background()
		live, third, other := s.spec("live", "alice"), s.spec("third", "carol"), s.spec("other", "bob")
		for _, spec := range []TargetSpec{live, third} {
			_, err := s.m.EnsureTarget(ctx, spec)
			require.NoError(t, err)
		}
		s.m.RemoveTarget(third.Key) // it fetched last

		_, err := s.m.EnsureTarget(ctx, other)

		require.ErrorIs(t, err, ErrBranchHidden, "live's credentials still see it")
		assert.Equal(t, []types.NamespacedName{live.Key, third.Key}, s.rec.got(), "no folder is written whole again")
	})

	t.Run("asks the credentials of another target when those that saw it last are now hidden from it", func(t *testing.T) {
		s := newHidingScene(t)
		ctx := context.Background()
		other, live := s.spec("other", "alice"), s.spec("live", "carol")
		for _, spec := range []TargetSpec{other, live} {
			_, err := s.m.EnsureTarget(ctx, spec)
			require.NoError(t, err)
		}
		live.Auth = &githttp.BasicAuth{Username: "bob", Password: "x"} // live, which fetched last, now reaches it as bob

		_, err := s.m.EnsureTarget(ctx, live)

		require.ErrorIs(t, err, ErrBranchHidden, "other's credentials still see it")
		assert.ElementsMatch(t, []types.NamespacedName{other.Key, live.Key}, s.rec.got(), "no folder is written whole again")
	})

	t.Run("keeps the windows of a target that could read the branch until it can again", func(t *testing.T) {
		m, remote, _, live, other, err := hidingRemote(t)
		require.ErrorIs(t, err, ErrBranchHidden)
		other.Auth = live.Auth
		_, err = m.EnsureTarget(context.Background(), other) // it reads the branch, as alice
		require.NoError(t, err)
		other.Auth = &githttp.BasicAuth{Username: "bob", Password: "x"} // and then cannot
		_, err = m.EnsureTarget(context.Background(), other)
		require.ErrorIs(t, err, ErrBranchHidden)
		key, _ := clusterConfigMap("a", "new")
		m.Submit(Change{Target: other.Key, Key: key, Author: "alice"})
		r := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: other.Key, Author: "alice",
			Message: "release", Deadline: time.Now().Add(time.Minute)}
		_, err = m.Request(r)
		require.NoError(t, err)
		before := remote.Head("main")

		_, err = m.workerOf(other.Key).flushIfDue(context.Background(), other.Key, 2*time.Hour)

		require.NoError(t, err)
		assert.Equal(t, before, remote.Head("main"), "nothing committed from another target's view of the branch")
		assert.Equal(t, 1, m.pendingOf(other.Key), "the change waits")
		out, err := m.Request(r)
		require.NoError(t, err)
		assert.Equal(t, ReasonRetrying, out.Reason)
		assert.Contains(t, out.Message, "hidden from this GitTarget's credentials")

		w := m.workerOf(other.Key)
		w.mu.Lock()
		w.targets[other.Key].untried = false // as when read access is taken away, the credentials unchanged
		w.lastFetch = time.Now()             // and another target fetched a moment ago
		w.mu.Unlock()
		_, err = m.EnsureTarget(context.Background(), other) // the controller's retry, within 5 s of the last fetch
		require.ErrorIs(t, err, ErrBranchHidden, "its own credentials are asked again, not the others' fetch trusted")
	})

	t.Run("commits the windows kept while it was hidden once its registration reads the branch again", func(t *testing.T) {
		s := newHidingScene(t)
		m, remote := s.m, s.remote
		live, other := s.spec("live", "alice"), s.spec("other", "bob")
		_, err := m.EnsureTarget(context.Background(), live)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { _ = m.Start(ctx); close(stopped) }()
		t.Cleanup(func() { cancel(); <-stopped })
		other.Window = WindowConfig{Quiet: 50 * time.Millisecond, MaxDelay: time.Hour}
		other.Auth = live.Auth
		_, err = m.EnsureTarget(context.Background(), other) // it reads the branch, as alice
		require.NoError(t, err)
		other.Auth, other.AuthVersion = &githttp.BasicAuth{Username: "bob", Password: "x"}, "1" // and then cannot
		_, err = m.EnsureTarget(context.Background(), other)
		require.ErrorIs(t, err, ErrBranchHidden)
		key, obj := clusterConfigMap("a", "new")
		s.cluster[key] = obj
		m.Submit(Change{Target: other.Key, Key: key, Author: "alice"})
		r := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: other.Key, Author: "alice",
			Message: "release", Deadline: time.Now().Add(time.Minute)}
		before := remote.Head("main")
		require.Eventually(t, func() bool {
			out, err := m.Request(r)
			return err == nil && out.Reason == ReasonRetrying
		}, 10*time.Second, 20*time.Millisecond, "the loop looked at the window while the branch was hidden, and left it")
		require.Equal(t, before, remote.Head("main"))

		// Read access comes back, the credentials unchanged (a server's ACL edited): the
		// same AuthVersion, so nothing but this registration tells the loop.
		other.Auth = live.Auth
		_, err = m.EnsureTarget(context.Background(), other)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			out, err := m.Request(r)
			return err == nil && out.Reason == ReasonCommitted
		}, 10*time.Second, 20*time.Millisecond, "the change kept while the branch was hidden is committed now, not at the loop's next timer")
		assert.NotEqual(t, before, remote.Head("main"))
	})

	// refusingAlice is a scene whose remote answers alice's requests with code once refuse
	// holds, and whose branch was deleted after live (alice) and other (carol) read it; other
	// then registers with new credentials, and that registration's error is returned.
	refusingAlice := func(t *testing.T, code int) (*hidingScene, TargetSpec, TargetSpec, error) {
		var refuse atomic.Bool
		remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if user, _, _ := r.BasicAuth(); user == "alice" && refuse.Load() {
					http.Error(w, http.StatusText(code), code)
					return
				}
				next.ServeHTTP(w, r)
			})
		}))
		s := newSceneOn(t, remote)
		ctx := context.Background()
		live, other := s.spec("live", "alice"), s.spec("other", "carol")
		for _, spec := range []TargetSpec{live, other} {
			_, err := s.m.EnsureTarget(ctx, spec)
			require.NoError(t, err)
		}
		refuse.Store(true)
		repotest.Git(t, remote.Dir, "update-ref", "-d", "refs/heads/main")
		other.Auth = &githttp.BasicAuth{Username: "dave", Password: "x"} // other fetches with new credentials
		_, err := s.m.EnsureTarget(ctx, other)
		return s, live, other, err
	}
	t.Run("is read as deleted when the remote refuses the other credentials", func(t *testing.T) {
		s, live, other, err := refusingAlice(t, http.StatusUnauthorized) // another tenant's token, revoked

		require.NoError(t, err, "other is not held back by live's credentials")
		got := s.rec.got()
		assert.ElementsMatch(t, []types.NamespacedName{live.Key, other.Key}, got[len(got)-2:], "each folder is written whole again")
	})
	t.Run("is retried, not read as deleted, when the other credentials cannot reach the remote", func(t *testing.T) {
		s, live, other, err := refusingAlice(t, http.StatusServiceUnavailable)

		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrBranchHidden)
		assert.ElementsMatch(t, []types.NamespacedName{live.Key, other.Key}, s.rec.got(), "no folder is written whole again")
	})
}
