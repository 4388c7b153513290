package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A hand-written multi-document file keeps its comments, order and other documents when
// the operator edits one value in place.
func TestAnEditChangesExactlyOneLineOfAHandWrittenFile(t *testing.T) {
	remote := newRemote(t)
	handWritten := `# Team shape settings, reviewed by humans.
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shape
  namespace: shape-a
data:
  # how many workers run
  workers: "2"

  motd: |
    hello
    world
---
# unrelated document, must stay byte-identical
apiVersion: v1
kind: ConfigMap
metadata:
  name: other
  namespace: elsewhere
data:
  x: "1"
`
	seedFile(t, remote, "live/settings.yaml", handWritten)
	kubectl(t, `apiVersion: v1
kind: Namespace
metadata:
  name: shape-a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shape
  namespace: shape-a
data:
  workers: "2"
  motd: |
    hello
    world
`, "apply", "-f", "-")

	startOperator(t, t.TempDir())
	setupTarget(t, "shape-a", remote, "live", "0s")
	watchConfigMaps(t, "shape-a", "")
	kubectl(t, "", "-n", "shape-a", "wait", "--for=condition=Ready", "--timeout=60s", "gittarget/live")
	before := strings.TrimSpace(git(t, remote, "rev-parse", "main"))

	kubectl(t, "", "-n", "shape-a", "patch", "configmap", "shape", "--type=merge", "-p", `{"data":{"workers":"3"}}`)
	content := waitFile(t, remote, "live/settings.yaml", func(c string) bool { return strings.Contains(c, `workers: "3"`) })
	assert.Equal(t, strings.Replace(handWritten, `workers: "2"`, `workers: "3"`, 1), content)
	diff := git(t, remote, "diff", "--numstat", before, "main")
	assert.Equal(t, "1\t1\tlive/settings.yaml", strings.TrimSpace(diff), "exactly one line changed")
	_, ok := fileAt(remote, "live/shape-a/configmaps/shape.yaml")
	assert.False(t, ok, "an object already in the folder is edited where it lives, not duplicated")
	fsck(t, remote)
}
