package repo_test

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestFindFilesListsTheNamedFilesOfTheWholeRepository(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	c := remote.Clone("main")
	c.WriteFile("kustomization.yaml", "resources: []\n")
	c.WriteFile("overlays/prod/kustomization.yaml", "resources: []\n")
	c.WriteExecutable("overlays/dev/Kustomization", "resources: []\n")
	c.WriteFile("overlays/dev/other.yaml", "kind: ConfigMap\n")
	c.Symlink("../prod/kustomization.yaml", "overlays/test/kustomization.yaml")
	c.WriteFile("live/team-a/kustomization.yaml", "resources: []\n")
	c.WriteFile("live-b/kustomization.yml", "resources: []\n")
	c.CommitAndPush("main", "layout")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	finder := repo.NewFileFinder("kustomization.yaml", "kustomization.yml", "Kustomization")

	got, err := r.FindFiles(finder, tip)
	require.NoError(t, err)
	for _, f := range got {
		content, _, err := r.ReadFile(tip, f.Path)
		require.NoError(t, err)
		assert.Equal(t, plumbing.ComputeHash(plumbing.BlobObject, content), f.Hash, "%s names its blob", f.Path)
		assert.Nil(t, f.Content)
	}
	assert.Equal(t, []string{"kustomization.yaml", "live-b/kustomization.yml", "live/team-a/kustomization.yaml",
		"overlays/dev/Kustomization", "overlays/prod/kustomization.yaml"}, paths(got), "regular and executable files of the names, no symlink, in path order")

	none, err := r.FindFiles(finder, plumbing.ZeroHash)
	require.NoError(t, err)
	assert.Empty(t, none, "a zero commit has no files")
}

func TestFindFilesFollowsCommitsThatChangeWhatItRemembers(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"a/b/kustomization.yaml": "x\n", "a/c/x.yaml": "x\n", "d/x.yaml": "x\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	finder := repo.NewFileFinder("kustomization.yaml")
	find := func(commit plumbing.Hash) []string {
		t.Helper()
		got, err := r.FindFiles(finder, commit)
		require.NoError(t, err)
		return paths(got)
	}

	assert.Equal(t, []string{"a/b/kustomization.yaml"}, find(tip))
	added := commit(t, r, tip, files("a/c/kustomization.yaml", "x\n", "d/e/kustomization.yaml", "x\n"), "add two")
	assert.Equal(t, []string{"a/b/kustomization.yaml", "a/c/kustomization.yaml", "d/e/kustomization.yaml"}, find(added),
		"the directories the commit changed are read again")
	removed := commit(t, r, added, map[string][]byte{"a/b/kustomization.yaml": nil}, "remove one")
	assert.Equal(t, []string{"a/c/kustomization.yaml", "d/e/kustomization.yaml"}, find(removed))
	moved := commit(t, r, removed, map[string][]byte{"a/c/kustomization.yaml": nil, "f/kustomization.yaml": []byte("x\n")}, "move one")
	assert.Equal(t, []string{"d/e/kustomization.yaml", "f/kustomization.yaml"}, find(moved),
		"a file moved is found at its new place")
	assert.Equal(t, []string{"a/b/kustomization.yaml"}, find(tip), "an older commit reads as it was")

	got, err := r.FindFiles(finder, tip)
	require.NoError(t, err)
	got[0].Path = "changed by the caller"
	assert.Equal(t, []string{"a/b/kustomization.yaml"}, find(tip), "what it remembers is never handed out")
}

func TestFindFilesReadsOnlyTheTreesACommitChanged(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	seed := map[string]string{}
	for _, d := range []string{"a/x", "a/y", "b/x", "b/y"} {
		seed[d+"/kustomization.yaml"] = d + "\n"
	}
	remote.Seed("main", seed, "seed") // 7 trees: the root, a, b and four below them
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	finder := repo.NewFileFinder("kustomization.yaml")
	search := func(commit plumbing.Hash) int {
		t.Helper()
		_, err := r.FindFiles(finder, commit)
		require.NoError(t, err)
		return finder.TreesRead()
	}

	assert.Equal(t, 7, search(tip), "the first search reads every tree")
	assert.Zero(t, search(tip), "another target's search of the same commit reads none")
	one := commit(t, r, tip, files("b/y/kustomization.yaml", "changed\n"), "one file")
	assert.Equal(t, 3, search(one), "a commit that changed b/y reads the root, b and b/y")
	assert.Zero(t, search(one))
	other := commit(t, r, one, files("a/y/kustomization.yaml", "changed too\n"), "another file")
	assert.Equal(t, 3, search(other), "what a search took over from the one before, below a tree it met, is still remembered")
}

// paths lists the files' paths.
func paths(files []repo.File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}
