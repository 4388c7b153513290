package batch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// A power loss after a loose object's rename reached the disk and before its data did
// leaves an empty file under the object's name; go-git then never stores that object again
// (the name exists). The empty file is written by hand: no kill can cut a write that way.
func TestACommitObjectAPowerLossLeftEmptyIsFetchedAgain(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/app/a.yaml": configMapDoc("a", "old")}, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir()})
	spec := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}, Committer: Identity{Name: "W", Email: "w@example.com"}}
	_, err = m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	next := remote.PushFiles("main", map[string]string{"live/app/b.yaml": configMapDoc("b", "x")}, "a person's commit")

	w := m.workerOf(liveKey)
	w.mu.Lock()
	empty := filepath.Join(w.repo.Dir(), "objects", next[:2], next[2:])
	require.NoError(t, os.MkdirAll(filepath.Dir(empty), 0o755))
	require.NoError(t, os.WriteFile(empty, nil, 0o444))
	reopened, err := repo.Open(context.Background(), w.repo.Dir(), remote.URL, nil) // the restart
	require.NoError(t, err)
	w.repo, w.lastFetch = reopened, time.Time{}
	w.mu.Unlock()

	st, err := m.EnsureTarget(context.Background(), spec)
	require.NoError(t, err, "the clone is found damaged once the fetch moved its ref there, and rebuilt")
	assert.Equal(t, 2, st.ObjectCount, "the folder at the new tip")
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.NoError(t, w.repo.Verify())
}
