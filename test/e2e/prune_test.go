package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// pruneScenario writes ConfigMaps kept and gone, deletes gone while the operator is down,
// restarts it, and returns the remote and namespace.
func pruneScenario(t *testing.T, ns, mode string) string {
	t.Helper()
	remote := newRemote(t)
	work := t.TempDir()
	op := startOperator(t, work)
	setupTarget(t, ns, remote, "live", "0s")
	kubectl(t, "", "-n", ns, "patch", "gittarget", "live", "--type=merge", "-p", `{"spec":{"prune":{"mode":"`+mode+`"}}}`)
	watchConfigMaps(t, ns, "")
	kubectl(t, "", "-n", ns, "create", "configmap", "kept", "--from-literal=k=v")
	kubectl(t, "", "-n", ns, "create", "configmap", "gone", "--from-literal=k=v")
	waitFile(t, remote, "live/"+ns+"/configmaps/gone.yaml", func(string) bool { return true })
	waitFile(t, remote, "live/"+ns+"/configmaps/kept.yaml", func(string) bool { return true })
	op.stop()
	kubectl(t, "", "-n", ns, "delete", "configmap", "gone")
	startOperator(t, work)
	kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "gittarget/live")
	return remote
}

func TestPruneOnEventKeepsWhatWasDeletedWhileDownAndCountsIt(t *testing.T) {
	remote := pruneScenario(t, "prune-a", "OnEvent")
	eventually(t, 30*time.Second, "status.orphans = 1", func() (bool, string) {
		o := kubectl(t, "", "-n", "prune-a", "get", "gittarget", "live", "-o", "jsonpath={.status.orphans}")
		return strings.TrimSpace(o) == "1", o
	})
	_, ok := fileAt(remote, "live/prune-a/configmaps/gone.yaml")
	assert.True(t, ok, "OnEvent keeps a document whose object was deleted while nobody watched")
	// A delete seen as an event is still mirrored.
	kubectl(t, "", "-n", "prune-a", "delete", "configmap", "kept")
	eventually(t, commitWait, "kept.yaml removed", func() (bool, string) {
		_, ok := fileAt(remote, "live/prune-a/configmaps/kept.yaml")
		return !ok, "present"
	})
	// With its rule deleted, no list of ConfigMaps is compared with Git for the target any
	// more: the count goes with it instead of staying until a restart.
	kubectl(t, "", "-n", "prune-a", "delete", "watchrule", "configmaps")
	eventually(t, 30*time.Second, "status.orphans = 0", func() (bool, string) {
		o := kubectl(t, "", "-n", "prune-a", "get", "gittarget", "live", "-o", "jsonpath={.status.orphans}")
		return strings.TrimSpace(o) == "0" || strings.TrimSpace(o) == "", o
	})
}

func TestPruneAlwaysRemovesWhatWasDeletedWhileDown(t *testing.T) {
	remote := pruneScenario(t, "prune-b", "Always")
	eventually(t, commitWait, "gone.yaml removed", func() (bool, string) {
		_, ok := fileAt(remote, "live/prune-b/configmaps/gone.yaml")
		return !ok, "present"
	})
	_, ok := fileAt(remote, "live/prune-b/configmaps/kept.yaml")
	assert.True(t, ok)
	fsck(t, remote)
}

func TestPruneNeverKeepsEverything(t *testing.T) {
	remote := pruneScenario(t, "prune-c", "Never")
	kubectl(t, "", "-n", "prune-c", "delete", "configmap", "kept")
	time.Sleep(5 * time.Second)
	for _, f := range []string{"gone", "kept"} {
		_, ok := fileAt(remote, "live/prune-c/configmaps/"+f+".yaml")
		assert.True(t, ok, "Never keeps %s.yaml", f)
	}
}
