package repo_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// A commit whose push reported an error, on which people pushed since: the writer's clone,
// fetched at depth 1, holds only the tip.
func TestDeepenBringsACommitPeoplePushedOnIntoSight(t *testing.T) {
	var fetches atomic.Int32
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("service") == "git-upload-pack" {
				fetches.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}))
	mine := plumbing.NewHash(remote.Seed("main", map[string]string{"live/a.yaml": "a: 1\n"}, "the writer's commit"))
	remote.Seed("main", map[string]string{"notes/1.md": "one\n"}, "a person's commit")
	tip := plumbing.NewHash(remote.Seed("main", map[string]string{"notes/2.md": "two\n"}, "another person's commit"))
	r := openClone(t, remote.URL, nil)
	fetched, err := r.Fetch(context.Background(), "main")
	require.NoError(t, err)
	require.Equal(t, tip, fetched)
	_, ok := r.Landed(tip, []plumbing.Hash{mine}, 100)
	require.False(t, ok, "out of sight at depth 1")

	before := fetches.Load()
	require.NoError(t, r.DeepenToLanded(context.Background(), "main", tip, []plumbing.Hash{mine}, 100))
	assert.Greater(t, fetches.Load(), before, "fetched the history")
	landed, ok := r.Landed(tip, []plumbing.Hash{mine}, 100)
	assert.True(t, ok)
	assert.Equal(t, mine, landed)
	assert.Equal(t, tip.String(), repotest.Git(t, r.Dir(), "rev-parse", "refs/remotes/origin/main"), "the tracking ref is left as it was")
	assert.Empty(t, repotest.Git(t, r.Dir(), "for-each-ref", "refs/gitops-reverser/"), "nothing is left behind")

	t.Run("pushes and fetches as before on the deeper history", func(t *testing.T) {
		next := commit(t, r, tip, files("live/b.yaml", "b: 1\n"), "the writer's next commit")
		push(t, r, "main", next, tip)
		assert.Equal(t, next.String(), remote.Head("main"))
		later := plumbing.NewHash(remote.Seed("main", map[string]string{"notes/3.md": "three\n"}, "a third person's commit"))
		fetched, err := r.Fetch(context.Background(), "main")
		require.NoError(t, err)
		assert.Equal(t, later, fetched)
		remote.Fsck()
	})
	t.Run("fetches nothing when the commit is in sight", func(t *testing.T) {
		before := fetches.Load()
		require.NoError(t, r.DeepenToLanded(context.Background(), "main", tip, []plumbing.Hash{mine}, 100))
		assert.Equal(t, before, fetches.Load())
	})
	t.Run("fetches nothing when the walk reaches the root without finding it", func(t *testing.T) {
		tip := plumbing.NewHash(remote.Head("main"))
		require.NoError(t, r.DeepenToLanded(context.Background(), "main", tip, []plumbing.Hash{plumbing.NewHash("0123456789012345678901234567890123456789")}, 100))
		before := fetches.Load()
		require.NoError(t, r.DeepenToLanded(context.Background(), "main", tip, []plumbing.Hash{plumbing.NewHash("0123456789012345678901234567890123456789")}, 100))
		assert.Equal(t, before, fetches.Load())
	})
	t.Run("finds a commit by what it says, as FindCommit does", func(t *testing.T) {
		fresh := openClone(t, remote.URL, nil)
		_, err := fresh.Fetch(context.Background(), "main")
		require.NoError(t, err)
		says := func(c *object.Commit) bool { return strings.TrimSpace(c.Message) == "the writer's commit" }
		require.NoError(t, fresh.DeepenToFind(context.Background(), "main", tip, 100, says))
		found, ok := fresh.FindCommit(tip, 100, says)
		assert.True(t, ok)
		assert.Equal(t, mine, found)
	})
	// Last: compaction keeps only the tip, out of reach of the walks above.
	t.Run("compacts, fetches and pushes as before after a deepen", func(t *testing.T) {
		base, err := r.Fetch(context.Background(), "main")
		require.NoError(t, err)
		require.NoError(t, r.DeepenToLanded(context.Background(), "main", base, []plumbing.Hash{plumbing.NewHash("0123456789012345678901234567890123456789")}, 100))
		_, err = r.Compact("main")
		require.NoError(t, err)
		later := plumbing.NewHash(remote.Seed("main", map[string]string{"notes/4.md": "four\n"}, "a fourth person's commit"))
		fetched, err := r.Fetch(context.Background(), "main")
		require.NoError(t, err)
		require.Equal(t, later, fetched)
		next := commit(t, r, later, files("live/c.yaml", "c: 1\n"), "the writer's commit after compaction")
		push(t, r, "main", next, later)
		assert.Equal(t, next.String(), remote.Head("main"))
		remote.Fsck()
		repotest.Git(t, r.Dir(), "fsck", "--connectivity-only")
	})
}

// A kill between a deepen's fetch and the removal of its ref leaves the ref; compaction
// would delete the commit it names, and the next open would find the clone damaged.
func TestADeepenRefAKillLeftIsRemovedWhenTheCloneIsOpened(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	tip := remote.Seed("main", map[string]string{"live/a.yaml": "a: 1\n"}, "seed")
	dir := filepath.Join(t.TempDir(), "clone")
	r, err := repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)
	_, err = r.Fetch(context.Background(), "main")
	require.NoError(t, err)
	require.NoError(t, r.Close())
	repotest.Git(t, dir, "update-ref", "refs/gitops-reverser/deepen", tip)

	r, err = repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)
	defer func() { _ = r.Close() }()
	assert.NoError(t, r.RepairedDamage())
	assert.Empty(t, repotest.Git(t, dir, "for-each-ref", "refs/gitops-reverser/"))
}
