package repo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestCommitWithANestedPathCreatesTheDirectories(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	r := openClone(t, remote.URL, nil)

	c := commit(t, r, plumbing.ZeroHash, files("live/_cluster/rbac.authorization.k8s.io/clusterroles/admin.yaml", "kind: ClusterRole\n"), "nested")
	push(t, r, "main", c, plumbing.ZeroHash)

	assert.Equal(t, strings.Join([]string{
		"040000 tree live",
		"040000 tree live/_cluster",
		"040000 tree live/_cluster/rbac.authorization.k8s.io",
		"040000 tree live/_cluster/rbac.authorization.k8s.io/clusterroles",
		"100644 blob live/_cluster/rbac.authorization.k8s.io/clusterroles/admin.yaml",
	}, "\n"), withoutHashes(remote.LsTree("main")))
	remote.Fsck()
}

func TestDeletingTheLastFileOfADirectoryRemovesTheEmptyDirectories(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	r := openClone(t, remote.URL, nil)
	c1 := commit(t, r, plumbing.ZeroHash, files(
		"live/team-a/configmaps/app.yaml", "a\n",
		"live/team-a/secrets/db.sops.yaml", "s\n",
	), "two files")

	c2 := commit(t, r, c1, map[string][]byte{"live/team-a/configmaps/app.yaml": nil}, "delete one")
	push(t, r, "main", c2, plumbing.ZeroHash)

	assert.Equal(t, strings.Join([]string{
		"040000 tree live",
		"040000 tree live/team-a",
		"040000 tree live/team-a/secrets",
		"100644 blob live/team-a/secrets/db.sops.yaml",
	}, "\n"), withoutHashes(remote.LsTree("main")))
	remote.Fsck()
}

func TestDeletingEveryFileLeavesTheEmptyTree(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	r := openClone(t, remote.URL, nil)
	c1 := commit(t, r, plumbing.ZeroHash, files("a/b.yaml", "b\n"), "one")

	c2 := commit(t, r, c1, map[string][]byte{"a/b.yaml": nil}, "none")
	push(t, r, "main", c2, plumbing.ZeroHash)

	assert.Equal(t, "4b825dc642cb6eb9a060e54bf8d69288fbee4904", repotest.Git(t, remote.Dir, "rev-parse", "main^{tree}"))
	remote.Fsck()
}

func TestCommitReturnsErrNoChangeWhenTheTreeIsUnchanged(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)
	c1 := commit(t, r, plumbing.ZeroHash, files("live/a.yaml", "a\n"), "one")

	cases := map[string]map[string][]byte{
		"same content":                      files("live/a.yaml", "a\n"),
		"deleting a missing file":           {"live/missing.yaml": nil},
		"deleting inside a missing folder":  {"nowhere/x/y.yaml": nil},
		"no changes at all":                 {},
		"same content and a missing delete": {"live/a.yaml": []byte("a\n"), "live/b.yaml": nil},
	}
	for name, changes := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := r.Commit(c1, changes, signature(), signature(), "noop")
			require.ErrorIs(t, err, repo.ErrNoChange)
		})
	}
}

func TestARootCommitWithNothingToWriteIsErrNoChange(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)

	_, err := r.Commit(plumbing.ZeroHash, map[string][]byte{"a.yaml": nil}, signature(), signature(), "noop")

	require.ErrorIs(t, err, repo.ErrNoChange)
}

func TestCommitReusesEveryTreeOffTheChangedPath(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	r := openClone(t, remote.URL, nil)
	c1 := commit(t, r, plumbing.ZeroHash, files(
		"live/a/x.yaml", "x\n",
		"live/b/y.yaml", "y\n",
		"other/z.yaml", "z\n",
	), "one")
	c2 := commit(t, r, c1, files("live/a/x.yaml", "x2\n"), "two")
	push(t, r, "main", c2, plumbing.ZeroHash)

	rev := func(spec string) string { return repotest.Git(t, remote.Dir, "rev-parse", spec) }
	assert.Equal(t, rev(c1.String()+":live/b"), rev(c2.String()+":live/b"))
	assert.Equal(t, rev(c1.String()+":other"), rev(c2.String()+":other"))
	assert.NotEqual(t, rev(c1.String()+":live/a"), rev(c2.String()+":live/a"))
	assert.Equal(t, c1.String(), rev(c2.String()+"^"))
	remote.Fsck()
}

func TestCommitAnEmptySliceWritesAnEmptyFileButNilDeletes(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	r := openClone(t, remote.URL, nil)

	c := commit(t, r, plumbing.ZeroHash, map[string][]byte{"empty.yaml": {}}, "empty file")
	push(t, r, "main", c, plumbing.ZeroHash)

	assert.Equal(t, "100644 blob empty.yaml", withoutHashes(remote.LsTree("main")))
}

func TestCommitKeepsTheAuthorCommitterAndMessage(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	r := openClone(t, remote.URL, nil)
	author := object.Signature{Name: "system:serviceaccount:ci:deployer", Email: "deployer@ci.example", When: time.Unix(1700000000, 0).UTC()}

	c, err := r.Commit(plumbing.ZeroHash, files("a.yaml", "a\n"), author, signature(), "update a")
	require.NoError(t, err)
	push(t, r, "main", c, plumbing.ZeroHash)

	got := repotest.Git(t, remote.Dir, "log", "-1", "--format=%an|%ae|%at|%cn|%ce|%B", "main")
	assert.Equal(t, "system:serviceaccount:ci:deployer|deployer@ci.example|1700000000|Jane Operator|jane@example.com|update a", got)
	remote.Fsck()
}

func TestCommitRejectsInvalidPathsBeforeWritingAnything(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)
	for _, p := range []string{"", "/abs.yaml", "a//b.yaml", "a/./b.yaml", "../up.yaml", "a/../b.yaml", ".git/config", "a/.GIT/x", "dir/", `a\b.yaml`, "a\nb.yaml", "a/git~1/x"} {
		t.Run(p, func(t *testing.T) {
			_, err := r.Commit(plumbing.ZeroHash, files(p, "x\n"), signature(), signature(), "bad")
			require.ErrorIs(t, err, repo.ErrInvalidPath)
		})
	}
}

func TestCommitRejectsPathsThatConflictWithTheTree(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)
	c1 := commit(t, r, plumbing.ZeroHash, files("live/a.yaml", "a\n"), "one")

	cases := map[string]map[string][]byte{
		"a file where a directory is":        files("live", "x\n"),
		"a directory where a file is":        files("live/a.yaml/b.yaml", "x\n"),
		"deleting a directory as a file":     {"live": nil},
		"a file and a directory in one call": files("new", "x\n", "new/b.yaml", "y\n"),
	}
	for name, changes := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := r.Commit(c1, changes, signature(), signature(), "conflict")
			require.ErrorIs(t, err, repo.ErrPathConflict)
		})
	}
}

func TestCommitRejectsSignaturesThatWouldCorruptTheCommit(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)
	good := signature()
	cases := map[string]object.Signature{
		"empty name":         {Name: " ", Email: good.Email, When: good.When},
		"angle bracket name": {Name: "Eve <evil>", Email: good.Email, When: good.When},
		"newline in email":   {Name: good.Name, Email: "a@b\nparent 0", When: good.When},
		"zero time":          {Name: good.Name, Email: good.Email},
	}
	for name, sig := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := r.Commit(plumbing.ZeroHash, files("a.yaml", "a\n"), sig, good, "x")
			require.ErrorIs(t, err, repo.ErrInvalidSignature)
			_, err = r.Commit(plumbing.ZeroHash, files("a.yaml", "a\n"), good, sig, "x")
			require.ErrorIs(t, err, repo.ErrInvalidSignature)
		})
	}
}

func TestCommitOnAnUnknownParentFails(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)

	_, err := r.Commit(plumbing.NewHash("0123456789abcdef0123456789abcdef01234567"), files("a.yaml", "a\n"), signature(), signature(), "x")

	require.ErrorIs(t, err, plumbing.ErrObjectNotFound)
}

func TestCommitInfoReturnsTheCommitterTime(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)
	c := commit(t, r, plumbing.ZeroHash, files("a.yaml", "a\n"), "one")

	when, err := r.CommitInfo(c)

	require.NoError(t, err)
	assert.True(t, when.Equal(signature().When), "got %s", when)
}

// withoutHashes turns `git ls-tree -r -t` output into "mode type path" lines.
func withoutHashes(lsTree string) string {
	var out []string
	for _, line := range strings.Split(lsTree, "\n") {
		meta, path, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		out = append(out, f[0]+" "+f[1]+" "+path)
	}
	return strings.Join(out, "\n")
}

func TestALargeCommitIsStoredAsOnePackThatSurvivesAReopen(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	dir := filepath.Join(t.TempDir(), "clone")
	r, err := repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)
	many := map[string][]byte{}
	for i := range 300 {
		many[fmt.Sprintf("live/ns-%d/configmaps/cm-%03d.yaml", i%7, i)] = fmt.Appendf(nil, "n: %d\n", i)
	}
	c1 := commit(t, r, plumbing.ZeroHash, many, "snapshot")
	push(t, r, "main", c1, plumbing.ZeroHash)
	c2 := commit(t, r, c1, files("live/ns-0/configmaps/cm-000.yaml", "n: changed\n"), "small")
	push(t, r, "main", c2, c1)

	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	require.NoError(t, err)
	assert.Len(t, packs, 1, "the snapshot's objects are one pack; the small commit's are loose")
	repotest.Git(t, dir, "fsck", "--full", "--strict")
	remote.Fsck()

	reopened, err := repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)
	require.NoError(t, reopened.RepairedDamage())
	got, found, err := reopened.ReadFile(c2, "live/ns-1/configmaps/cm-001.yaml")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "n: 1\n", string(got))
	assert.Equal(t, "n: 1", strings.TrimSpace(remote.Show("main", "live/ns-1/configmaps/cm-001.yaml")))
}

func TestACommitReachesTheCloneOnlyOnceItIsDeliveredOrRead(t *testing.T) {
	looseObjects := func(dir string) int {
		n := 0
		_ = filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d os.DirEntry, _ error) error {
			if d != nil && !d.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
				n++
			}
			return nil
		})
		return n
	}
	remote := repotest.NewFileRemote(t)
	dir := filepath.Join(t.TempDir(), "clone")
	r, err := repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)

	c1 := commit(t, r, plumbing.ZeroHash, files("live/a.yaml", "a\n"), "first")
	assert.Zero(t, looseObjects(dir), "compressing into the clone is not on the way to the remote")
	push(t, r, "main", c1, plumbing.ZeroHash)
	assert.Equal(t, 4, looseObjects(dir), "delivered, then stored: blob, two trees, commit")
	remote.Fsck()

	c2 := commit(t, r, c1, files("live/b.yaml", "b\n"), "second")
	got, found, err := r.ReadFile(c2, "live/b.yaml")
	require.NoError(t, err)
	require.True(t, found, "a read before the push stores the commit first")
	assert.Equal(t, "b\n", string(got))
	repotest.Git(t, dir, "fsck", "--full", "--strict")
}
