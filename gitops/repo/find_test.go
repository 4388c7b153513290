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
	assert.Equal(t, []string{"kustomization.yaml", "live-b/kustomization.yml", "live/team-a/kustomization.yaml",
		"overlays/dev/Kustomization", "overlays/prod/kustomization.yaml"}, got, "regular and executable files of the names, no symlink, in path order")

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
		return got
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
	got[0] = "changed by the caller"
	assert.Equal(t, []string{"a/b/kustomization.yaml"}, find(tip), "what it remembers is never handed out")
}
