package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clonesOf lists the local clones under work whose remote is remote (other tests' GitTargets
// share the control plane, so the work directory holds their clones too).
func clonesOf(t *testing.T, work, remote string) []string {
	t.Helper()
	entries, err := os.ReadDir(work)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		url, err := gitErr(filepath.Join(work, e.Name()), "config", "remote.origin.url")
		if err == nil && strings.TrimSuffix(strings.TrimSpace(url), "/") == remoteURL(t, remote) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestAGitTargetDeletedWhileTheOperatorWasDownLeavesNoClone(t *testing.T) {
	const ns = "sweep-a"
	remote := newRemote(t)
	work := t.TempDir()
	op := startOperator(t, work)
	setupTarget(t, ns, remote, "live", "0s")
	require.Len(t, clonesOf(t, work, remote), 1, "the target's branch is cloned")

	op.stop()
	kubectl(t, "", "-n", ns, "delete", "gittarget", "live")
	op = startOperator(t, work)

	eventually(t, 60*time.Second, "the clone deleted, and the deletion logged", func() (bool, string) {
		left := clonesOf(t, work, remote)
		return len(left) == 0 && strings.Contains(op.logs.String(), "deleted a local clone no GitTarget uses"), strings.Join(left, ", ")
	})
}
