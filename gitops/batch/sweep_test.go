package batch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

func TestStaleClones(t *testing.T) {
	const (
		used   = "00112233445566aa"
		unused = "ffeeddccbbaa9988"
	)
	for _, tt := range []struct {
		name  string
		names []string
		want  []string
	}{
		{"deletes a clone no GitTarget uses", []string{used, unused}, []string{unused}},
		{"keeps every clone in use", []string{used}, nil},
		{"finishes the deletion a kill interrupted of a clone no GitTarget uses", []string{unused + ".removing"}, []string{unused}},
		{"leaves an interrupted deletion of a clone in use to that clone", []string{used + ".removing"}, nil},
		{"names a clone once when it and its interrupted deletion are both there", []string{unused + ".removing", unused}, []string{unused}},
		{"never touches a directory not named as the Manager names clones",
			[]string{"notes", "FFEEDDCCBBAA9988", "ffeeddccbbaa998", "ffeeddccbbaa99880", "ffeeddccbbaa998g", "notes.removing"}, nil},
		{"lists what it deletes in order", []string{"ffffffffffffffff", unused, "0000000000000000"},
			[]string{"0000000000000000", unused, "ffffffffffffffff"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, staleClones(tt.names, map[string]bool{used: true}))
		})
	}
}

func TestAStartSweepDeletesTheClonesNoGitTargetUses(t *testing.T) {
	// An earlier process cloned main for ops/live and other for ops/gone; ops/gone was
	// deleted while no process ran, and a new one starts on the same work directory.
	rw := newRunningWriter(t)
	dir := t.TempDir()
	live, gone := rw.spec("live", "main"), rw.spec("gone", "other")
	earlier := NewManager(Options{Log: logr.Discard(), WorkDir: dir, Resolver: rw.cluster})
	for _, s := range []TargetSpec{live, gone} {
		_, err := earlier.EnsureTarget(context.Background(), s)
		require.NoError(t, err)
	}
	liveClone := filepath.Base(earlier.cloneDir(workerKey{url: repo.NormalizeURL(live.URL), branch: "main"}))
	goneClone := filepath.Base(earlier.cloneDir(workerKey{url: repo.NormalizeURL(gone.URL), branch: "other"}))
	require.ElementsMatch(t, []string{liveClone, goneClone}, dirNames(t, dir))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "notes"), 0o755))
	// Named like a clone, but it holds a work tree: never deleted.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "0123456789abcdef", ".git"), 0o755))

	t.Run("deletes the clone of a target deleted while the operator was down and keeps the others", func(t *testing.T) {
		after := NewManager(Options{Log: logr.Discard(), WorkDir: dir, Resolver: rw.cluster})
		removed, err := after.SweepClones([]Clone{{URL: strings.Replace(live.URL, "file://", "FILE://", 1) + "/", Branch: "main"}}) // another spelling of its URL
		require.ErrorContains(t, err, "0123456789abcdef", "a directory that is not a clone is refused, by name")
		assert.Equal(t, []string{goneClone}, removed)
		assert.ElementsMatch(t, []string{liveClone, "notes", "0123456789abcdef"}, dirNames(t, dir))

		_, err = after.EnsureTarget(context.Background(), live)
		require.NoError(t, err, "the kept clone serves its target")
	})
	t.Run("keeps the clone of a target registered after the list was read", func(t *testing.T) {
		rw := newRunningWriter(t)
		spec := rw.spec("new", "other")
		_, err := rw.m.EnsureTarget(context.Background(), spec)
		require.NoError(t, err)
		removed, err := rw.m.SweepClones(nil)
		require.NoError(t, err)
		assert.Empty(t, removed)
		rw.write(t, spec.Key, "other", "b", "one")
	})
	t.Run("keeps the clone of a suspended target", func(t *testing.T) {
		rw, spec := writingTarget(t)
		rw.m.SuspendTarget(spec.Key, "its GitProvider is gone")
		removed, err := rw.m.SweepClones(nil)
		require.NoError(t, err)
		assert.Empty(t, removed)
		assert.Equal(t, 1, rw.clones(t))
	})
	t.Run("finishes a deletion a kill interrupted", func(t *testing.T) {
		dir := t.TempDir()
		aside := filepath.Join(dir, "ffeeddccbbaa9988.removing")
		require.NoError(t, os.MkdirAll(filepath.Join(aside, "objects", "pack"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(aside, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
		m := NewManager(Options{Log: logr.Discard(), WorkDir: dir})
		removed, err := m.SweepClones(nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"ffeeddccbbaa9988"}, removed)
		assert.Empty(t, dirNames(t, dir))
	})
	t.Run("refuses, by name, a leftover named as a deletion that holds a work tree", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "ffeeddccbbaa9988.removing", ".git"), 0o755))
		m := NewManager(Options{Log: logr.Discard(), WorkDir: dir})
		removed, err := m.SweepClones(nil)
		require.ErrorContains(t, err, "ffeeddccbbaa9988.removing")
		assert.Empty(t, removed)
		assert.Equal(t, []string{"ffeeddccbbaa9988.removing"}, dirNames(t, dir))
	})
	t.Run("never takes the clone of a target registering, writing or being removed meanwhile", func(t *testing.T) {
		rw := newRunningWriter(t)
		live, second := rw.spec("live", "main"), rw.spec("second", "other")
		_, err := rw.m.EnsureTarget(context.Background(), live)
		require.NoError(t, err)
		for i := range 20 {
			var wg sync.WaitGroup
			wg.Add(3)
			go func() {
				defer wg.Done()
				_, err := rw.m.EnsureTarget(context.Background(), second)
				assert.NoError(t, err)
			}()
			go func() { defer wg.Done(); rw.m.RemoveTarget(second.Key) }()
			go func() {
				defer wg.Done()
				_, err := rw.m.SweepClones(nil)
				assert.NoError(t, err)
			}()
			wg.Wait()
			rw.write(t, live.Key, "main", "a", fmt.Sprint(i))
		}
		_, err = rw.m.EnsureTarget(context.Background(), second)
		require.NoError(t, err)
		rw.write(t, second.Key, "other", "b", "one")
		rw.remote.Fsck()
		assert.Zero(t, testutil.ToFloat64(rw.metrics.Repairs), "no clone in use was damaged")
		assert.Equal(t, 2, rw.clones(t), "each branch has its clone, nothing else is left")
	})
	t.Run("has nothing to do without a work directory", func(t *testing.T) {
		m := NewManager(Options{Log: logr.Discard(), WorkDir: filepath.Join(t.TempDir(), "none")})
		removed, err := m.SweepClones(nil)
		require.NoError(t, err)
		assert.Empty(t, removed)
	})
}

// dirNames lists the names of dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() { // the sweep deletes clones; files (the journal of deletions) stay
			names = append(names, e.Name())
		}
	}
	return names
}

func TestAStartSweepDeletesTheSavedIndexesNoGitTargetWrites(t *testing.T) {
	rw := newRunningWriter(t)
	live := rw.spec("live", "main")
	_, err := rw.m.EnsureTarget(context.Background(), live)
	require.NoError(t, err)
	clone := rw.m.workerOf(live.Key).repo.Dir()
	ix := newFolderIndex(nil, nil)
	for _, folder := range []string{"live", "listed", "gone", "suspended"} {
		require.NoError(t, saveIndex(clone, "build", folder, ix))
	}
	indexes := filepath.Join(clone, savedIndexDir)
	saving := filepath.Base(savedIndexPath(clone, "live")) + ".tmp" // a save of live in progress
	require.NoError(t, os.WriteFile(filepath.Join(indexes, saving), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(indexes, "notes.txt"), nil, 0o644))

	removed, err := rw.m.SweepClones([]Clone{{URL: live.URL, Branch: "main", Folder: "listed"}, {Branch: "elsewhere", Folder: "suspended"}})
	require.NoError(t, err)
	assert.Empty(t, removed)
	assert.NoFileExists(t, savedIndexPath(clone, "gone"), "the index of a folder no GitTarget writes goes")
	assert.FileExists(t, savedIndexPath(clone, "listed"), "the index of a GitTarget listed is kept")
	assert.FileExists(t, savedIndexPath(clone, "live"), "the index of a target registered after the list was read is kept")
	assert.FileExists(t, savedIndexPath(clone, "suspended"), "the index of a target whose GitProvider is missing is kept for its return")
	assert.FileExists(t, filepath.Join(indexes, saving), "a save in progress of a kept folder is kept")
	assert.FileExists(t, filepath.Join(indexes, "notes.txt"), "a file not named as saved indexes are is never touched")
}

func TestIsSavedIndexName(t *testing.T) {
	path := savedIndexPath("/clone", "live")
	assert.True(t, isSavedIndexName(filepath.Base(path)))
	assert.True(t, isSavedIndexName(filepath.Base(path)+".tmp"))
	for _, name := range []string{"index-.json", "index-0123456789ABCDEF.json", "index-0123456789abcdef.yaml", "0123456789abcdef.json", "index-0123456789abcdef.json.bak"} {
		assert.False(t, isSavedIndexName(name), name)
	}
}

func TestAStartSweepDropsTheJournalledDeletionsOfGitTargetsDeletedWhileDown(t *testing.T) {
	dir := t.TempDir()
	live, gone, joined := liveKey, types.NamespacedName{Namespace: "ops", Name: "gone"}, types.NamespacedName{Namespace: "ops", Name: "new"}
	j, _ := openJournal(dir, logr.Discard(), time.Now())
	for _, target := range []types.NamespacedName{live, gone, joined} {
		j.record(Change{Target: target, Key: qkey("a"), Deleted: true, Author: "alice"})
	}
	m := NewManager(Options{Log: logr.Discard(), WorkDir: dir})
	require.Equal(t, 3, m.RecoveredDeletions())
	m.mu.Lock()
	m.known[joined] = &target{} // registered after the sweep listed the GitTargets
	m.mu.Unlock()
	listed := []Clone{{URL: "file:///nowhere", Branch: "main", Folder: "live", Target: live}}

	_, err := m.SweepClones([]Clone{{URL: "file:///nowhere", Branch: "main", Folder: "live"}})
	require.NoError(t, err)
	require.Equal(t, 3, m.RecoveredDeletions(), "a list that does not name its targets tells none gone")

	// A GitTarget of the gone one's name, made again after the list: its deletion is its own.
	m.journal.record(Change{Target: gone, Key: qkey("b"), Deleted: true, Author: "bob"})
	_, err = m.SweepClones(listed)

	require.NoError(t, err)
	assert.Equal(t, 2, m.RecoveredDeletions(), "live's and the new target's are kept for their snapshots")
	m.mu.Lock()
	assert.NotContains(t, m.recovered, gone)
	m.mu.Unlock()
	_, pending := openJournal(dir, logr.Discard(), time.Now())
	require.Len(t, pending[gone], 1, "the earlier process's deletion is not kept in the journal for a week; the one made since is")
	assert.Equal(t, Change{Target: gone, Key: qkey("b"), Deleted: true, Author: "bob"}, pending[gone][qkey("b")].Change)
	assert.Contains(t, pending, live)
}
