package batch_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// packfiles lists the packfiles of every clone under workDir.
func packfiles(t *testing.T, workDir string) []string {
	t.Helper()
	packs, err := filepath.Glob(filepath.Join(workDir, "*", "objects", "pack", "*.pack"))
	require.NoError(t, err)
	return packs
}

func TestACloneThatOnlyFetchesIsCompactedToo(t *testing.T) {
	workDir := t.TempDir()
	s := newWriterSceneWith(t, nil, batch.Options{WorkDir: workDir, CompactPacks: 2})
	require.Len(t, packfiles(t, workDir), 1, "the first fetch brought one pack")

	s.remote.PushFiles("main", map[string]string{"docs/notes.md": "people commit here too\n"}, "a human commit outside the folder")
	time.Sleep(5100 * time.Millisecond) // the writer fetches at most every 5 s on its target's reconcile
	s.ensure()

	packs := packfiles(t, workDir)
	require.Len(t, packs, 1, "the second fetch's pack made the clone due, and it was compacted at once")
	_, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(packs[0]))), "shallow"))
	assert.NoError(t, err, "compaction marks the tip shallow")
}
