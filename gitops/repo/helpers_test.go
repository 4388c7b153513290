package repo_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// signature is a fixed identity so commits are reproducible in tests.
func signature() object.Signature {
	return object.Signature{
		Name:  "Jane Operator",
		Email: "jane@example.com",
		When:  time.Date(2025, 3, 14, 15, 9, 26, 0, time.FixedZone("CET", 3600)),
	}
}

// openClone opens a fresh local clone of url in a temporary directory.
func openClone(t *testing.T, url string, auth transport.AuthMethod) *repo.Repo {
	t.Helper()
	r, err := repo.Open(context.Background(), filepath.Join(t.TempDir(), "clone"), url, auth)
	require.NoError(t, err)
	require.NoError(t, r.RepairedDamage(), "a new clone has nothing to repair")
	return r
}

// commit makes a commit with the test signature and fails the test on error.
func commit(t *testing.T, r *repo.Repo, parent plumbing.Hash, changes map[string][]byte, msg string) plumbing.Hash {
	t.Helper()
	h, err := r.Commit(parent, changes, signature(), signature(), msg)
	require.NoError(t, err)
	return h
}

// fetch fetches branch and fails the test on error.
func fetch(t *testing.T, r *repo.Repo, branch string) plumbing.Hash {
	t.Helper()
	h, err := r.Fetch(context.Background(), branch)
	require.NoError(t, err)
	return h
}

// push pushes and fails the test on error.
func push(t *testing.T, r *repo.Repo, branch string, tip, expected plumbing.Hash) {
	t.Helper()
	require.NoError(t, r.Push(context.Background(), branch, tip, expected))
}

// files is shorthand for a change set of text files.
func files(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}
