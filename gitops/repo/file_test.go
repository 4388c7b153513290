package repo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestReadFileReturnsOneFilesContentOrNotFound(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	content, found, err := r.ReadFile(tip, "live/team-a/configmaps/app.yaml")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "kind: ConfigMap\n", string(content))

	content, found, err = r.ReadFile(tip, "live/hooks/run.sh")
	require.NoError(t, err)
	assert.True(t, found, "executables are files too")
	assert.Equal(t, "#!/bin/sh\n", string(content))

	for _, missing := range []string{"live/nope.yaml", "nowhere/x.yaml"} {
		_, found, err = r.ReadFile(tip, missing)
		require.NoError(t, err, missing)
		assert.False(t, found, missing)
	}
	_, _, err = r.ReadFile(tip, "README.md/x")
	require.ErrorIs(t, err, repo.ErrPathConflict, "a file where a directory is needed")
	_, found, err = r.ReadFile(plumbing.ZeroHash, "README.md")
	require.NoError(t, err)
	assert.False(t, found)
}

func TestReadFileRefusesSymlinksSubmodulesAndBadPaths(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")

	for _, p := range []string{"live/link.yaml", "live/vendor/lib", "live"} {
		_, _, err := r.ReadFile(tip, p)
		assert.Error(t, err, p)
	}
	_, _, err := r.ReadFile(tip, "../etc/passwd")
	require.ErrorIs(t, err, repo.ErrInvalidPath)
}

func TestActAsTakesEffectWithoutReopening(t *testing.T) {
	remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
	want := remote.PushFiles("main", map[string]string{"a.yaml": "a\n"}, "one")
	r := openClone(t, remote.URL, &githttp.BasicAuth{Username: "alice", Password: "old"})
	_, err := r.Fetch(context.Background(), "main")
	require.Error(t, err)

	r.ActAs(remote.URL, &githttp.BasicAuth{Username: "alice", Password: "s3cret"})

	assert.Equal(t, want, fetch(t, r, "main").String())
}

func TestAFailedFetchOrPushNamesTheActingTargetsAddress(t *testing.T) {
	remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
	tip := remote.PushFiles("main", map[string]string{"a.yaml": "a\n"}, "one")
	r := openClone(t, remote.URL, &githttp.BasicAuth{Username: "alice", Password: "s3cret"})
	require.Equal(t, tip, fetch(t, r, "main").String())
	c := commit(t, r, plumbing.NewHash(tip), files("b.yaml", "b\n"), "two")
	// Another target's address for the same repository, as it wrote it: errors it reads
	// name it, not the address of the target that opened the shared clone.
	other := strings.Replace(remote.URL, "127.0.0.1", "localhost", 1)
	r.ActAs(other, &githttp.BasicAuth{Username: "bob", Password: "wrong"})

	_, err := r.Fetch(context.Background(), "main")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fetch main from "+other+":")
	assert.NotContains(t, err.Error(), remote.URL)
	err = r.Push(context.Background(), "main", c, plumbing.NewHash(tip))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "push main to "+other+":")
	assert.NotContains(t, err.Error(), remote.URL)
}

func TestTreeReaderReadsLikeReadFile(t *testing.T) {
	remote, _ := mixedRemote(t)
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	tr := r.TreeReader(tip)
	for _, p := range []string{"live/team-a/configmaps/app.yaml", "live/hooks/run.sh", "live/nope.yaml", "nowhere/x.yaml", "README.md"} {
		want, wantFound, wantErr := r.ReadFile(tip, p)
		for i := 0; i < 2; i++ { // the second read comes from the directory cache
			got, found, err := tr.ReadFile(p)
			assert.Equal(t, wantErr, err, p)
			assert.Equal(t, wantFound, found, p)
			assert.Equal(t, want, got, p)
		}
	}
	_, found, err := r.TreeReader(plumbing.ZeroHash).ReadFile("README.md")
	require.NoError(t, err)
	assert.False(t, found)
}
