package batch

import (
	"context"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// hidingRemote serves a repository whose branch main is hidden from user bob, and a writer
// with two targets on it, ops/live as alice and ops/other as bob (registered in that order,
// other's registration's error returned), each writing its own folder.
func hidingRemote(t *testing.T) (*Manager, *repotest.Remote, *readyRecorder, TargetSpec, TargetSpec, error) {
	t.Helper()
	remote := repotest.NewHTTPRemote(t, repotest.HideBranchFrom("bob", "main"))
	remote.Seed("main", map[string]string{"live/README.md": "objects\n", "other/README.md": "objects\n"}, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	rec := &readyRecorder{}
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), OnFolderReady: rec.add})
	spec := func(folder, user string) TargetSpec {
		return TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: folder}, URL: remote.URL, Branch: "main",
			Folder: folder, Messages: msgs, Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour},
			Committer: Identity{Name: "W", Email: "w@example.com"}, Auth: &githttp.BasicAuth{Username: user, Password: "x"}}
	}
	live, other := spec("live", "alice"), spec("other", "bob")
	_, err = m.EnsureTarget(context.Background(), live)
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
		assert.Equal(t, []types.NamespacedName{live.Key, other.Key}, got[len(got)-2:], "each folder is written whole again")
	})
}
