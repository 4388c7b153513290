package repo_test

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// mixedRemote has a regular file, an executable, a symlink and a gitlink
// under live/, plus a file outside it, all made with the git CLI.
func mixedRemote(t *testing.T) (*repotest.Remote, string) {
	t.Helper()
	remote := repotest.NewHTTPRemote(t)
	c := remote.Clone("main")
	c.WriteFile("live/team-a/configmaps/app.yaml", "kind: ConfigMap\n")
	c.WriteExecutable("live/hooks/run.sh", "#!/bin/sh\n")
	c.Symlink("team-a/configmaps/app.yaml", "live/link.yaml")
	c.AddGitlink("live/vendor/lib", "0123456789abcdef0123456789abcdef01234567")
	c.WriteFile("README.md", "outside\n")
	return remote, c.CommitAndPush("main", "mixed entries")
}

func TestReadTreeReportsEveryKindOfEntryUnderTheFolder(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	got, err := r.ReadTree(tip, "live")

	require.NoError(t, err)
	for i, f := range got {
		assert.False(t, f.Hash.IsZero(), "%s names its object", f.Path)
		if f.Content != nil {
			assert.Equal(t, plumbing.ComputeHash(plumbing.BlobObject, f.Content), f.Hash, "%s names its blob", f.Path)
		}
		got[i].Hash = plumbing.ZeroHash
	}
	assert.Equal(t, []repo.File{
		{Path: "live/hooks/run.sh", Kind: repo.Executable, Content: []byte("#!/bin/sh\n")},
		{Path: "live/link.yaml", Kind: repo.Symlink},
		{Path: "live/team-a/configmaps/app.yaml", Kind: repo.Regular, Content: []byte("kind: ConfigMap\n")},
		{Path: "live/vendor/lib", Kind: repo.Submodule},
	}, got)
}

func TestReadTreeOfTheRootListsEverything(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	for _, root := range []string{"", ".", "/"} {
		got, err := r.ReadTree(tip, root)
		require.NoError(t, err)
		assert.Len(t, got, 5, "folder %q", root)
	}
}

func TestReadTreeOfAMissingFolderOrTheZeroCommitIsEmpty(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	got, err := r.ReadTree(tip, "live/nowhere")
	require.NoError(t, err)
	assert.Empty(t, got)

	got, err = r.ReadTree(plumbing.ZeroHash, "live")
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestReadTreeAcceptsATrailingSlash(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	got, err := r.ReadTree(tip, "live/team-a/")

	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "live/team-a/configmaps/app.yaml", got[0].Path)
}

func TestReadTreeOfAFolderThatIsAFileIsAConflict(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	_, err := r.ReadTree(tip, "README.md")

	require.ErrorIs(t, err, repo.ErrPathConflict)
}

func TestCommitOverwritesASymlinkWithARegularFileAndKeepsTheGitlink(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	c := commit(t, r, tip, files("live/link.yaml", "kind: ConfigMap\n"), "replace link")
	push(t, r, "main", c, tip)

	got, err := r.ReadTree(c, "live")
	require.NoError(t, err)
	kinds := map[string]repo.EntryKind{}
	for _, f := range got {
		kinds[f.Path] = f.Kind
	}
	assert.Equal(t, repo.Regular, kinds["live/link.yaml"])
	assert.Equal(t, repo.Submodule, kinds["live/vendor/lib"])
	remote.Fsck()
}

func TestEntryKindsHaveReadableNames(t *testing.T) {
	assert.Equal(t, "regular", repo.Regular.String())
	assert.Equal(t, "executable", repo.Executable.String())
	assert.Equal(t, "symlink", repo.Symlink.String())
	assert.Equal(t, "submodule", repo.Submodule.String())
}
