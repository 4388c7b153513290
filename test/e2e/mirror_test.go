package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commitWait is the quiet window used by these tests plus a few seconds of slack.
const commitWait = 30 * time.Second

func watchConfigMaps(t *testing.T, ns, selector string) {
	t.Helper()
	sel := ""
	if selector != "" {
		sel = "\n    objectSelector:\n      matchLabels:\n        " + selector
	}
	kubectl(t, fmt.Sprintf(`apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: configmaps
  namespace: %s
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: [""]
    resources: ["configmaps"]%s
`, ns, sel), "apply", "-f", "-")
	kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "watchrule/configmaps")
}

func waitFile(t *testing.T, remote, path string, want func(string) bool) string {
	t.Helper()
	var content string
	eventually(t, commitWait, path, func() (bool, string) {
		c, ok := fileAt(remote, path)
		content = c
		return ok && want(c), c
	})
	return content
}

func TestConfigMapCreateEditDeleteBecomeCommits(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "team-a", remote, "live", "1s")
	watchConfigMaps(t, "team-a", "")

	kubectl(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: team-a
  labels:
    app: web
data:
  greeting: hello
`, "apply", "-f", "-")
	path := "live/team-a/configmaps/app.yaml"
	content := waitFile(t, remote, path, func(c string) bool { return strings.Contains(c, "greeting: hello") })
	for _, gone := range []string{"uid:", "resourceVersion:", "managedFields", "creationTimestamp", "status:", "last-applied-configuration"} {
		assert.NotContains(t, content, gone)
	}
	assert.True(t, strings.HasPrefix(content, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\n"), content)
	assert.Contains(t, commits(t, remote)[0], "Create ConfigMap team-a/app")
	fsck(t, remote)

	kubectl(t, "", "-n", "team-a", "patch", "configmap", "app", "--type=merge", "-p", `{"data":{"greeting":"hello, Git"}}`)
	waitFile(t, remote, path, func(c string) bool { return strings.Contains(c, "greeting: hello, Git") })
	assert.Contains(t, commits(t, remote)[0], "Update ConfigMap team-a/app")
	fsck(t, remote)

	kubectl(t, "", "-n", "team-a", "delete", "configmap", "app")
	eventually(t, commitWait, "file removed", func() (bool, string) {
		_, ok := fileAt(remote, path)
		return !ok, "still present"
	})
	assert.Contains(t, commits(t, remote)[0], "Delete ConfigMap team-a/app")
	fsck(t, remote)

	kubectl(t, "", "-n", "team-a", "wait", "--for=condition=Ready", "--timeout=30s", "gittarget/live")
	got := kubectl(t, "", "-n", "team-a", "get", "gittarget", "live", "-o", "jsonpath={.status.lastCommit.sha}")
	head := strings.TrimSpace(git(t, remote, "rev-parse", "main"))
	eventually(t, 15*time.Second, "status.lastCommit = remote head", func() (bool, string) {
		got = kubectl(t, "", "-n", "team-a", "get", "gittarget", "live", "-o", "jsonpath={.status.lastCommit.sha}")
		return got == head, got
	})
}

func TestInitialSnapshotCapturesPreExistingObjectsAndRestartMakesNoCommit(t *testing.T) {
	remote := newRemote(t)
	work := t.TempDir()
	kubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n", "apply", "-f", "-")
	kubectl(t, "", "-n", "team-b", "create", "configmap", "before", "--from-literal=k=v")

	op := startOperator(t, work)
	setupTarget(t, "team-b", remote, "clusters/dev", "1s")
	watchConfigMaps(t, "team-b", "")
	waitFile(t, remote, "clusters/dev/team-b/configmaps/before.yaml", func(c string) bool { return strings.Contains(c, "k: v") })
	time.Sleep(3 * time.Second) // let the quiet window pass

	head := strings.TrimSpace(git(t, remote, "rev-parse", "main"))
	fsck(t, remote)

	op.stop()
	startOperator(t, work)
	kubectl(t, "", "-n", "team-b", "wait", "--for=condition=Ready", "--timeout=60s", "gittarget/live", "watchrule/configmaps")
	time.Sleep(5 * time.Second) // snapshot + quiet window + push would have happened by now
	assert.Equal(t, head, strings.TrimSpace(git(t, remote, "rev-parse", "main")), "a restart with nothing changed must not commit")

	// A change made while the operator ran again still lands.
	kubectl(t, "", "-n", "team-b", "create", "configmap", "after", "--from-literal=a=b")
	waitFile(t, remote, "clusters/dev/team-b/configmaps/after.yaml", func(c string) bool { return strings.Contains(c, "a: b") })
	fsck(t, remote)
}

func TestObjectSelectorExcludesUnlabelledObjects(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "team-c", remote, "live", "0s")
	watchConfigMaps(t, "team-c", "gitops: enabled")

	kubectl(t, "", "-n", "team-c", "create", "configmap", "plain", "--from-literal=x=1")
	kubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: chosen\n  namespace: team-c\n  labels:\n    gitops: enabled\ndata:\n  x: \"2\"\n", "apply", "-f", "-")
	waitFile(t, remote, "live/team-c/configmaps/chosen.yaml", func(string) bool { return true })
	_, ok := fileAt(remote, "live/team-c/configmaps/plain.yaml")
	assert.False(t, ok, "an unlabelled ConfigMap must not be written")

	// Removing the label makes the object leave Git like a deleted one.
	kubectl(t, "", "-n", "team-c", "label", "configmap", "chosen", "gitops-")
	eventually(t, commitWait, "unlabelled object removed", func() (bool, string) {
		_, ok := fileAt(remote, "live/team-c/configmaps/chosen.yaml")
		return !ok, "still present"
	})
	fsck(t, remote)
}

func TestClusterRoleViaClusterWatchRuleLandsUnderCluster(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "platform", remote, "cluster", "0s")
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: ClusterWatchRule
metadata:
  name: roles
spec:
  targetRef:
    namespace: platform
    name: live
  rules:
  - apiGroups: ["rbac.authorization.k8s.io"]
    resources: ["clusterroles"]
    objectSelector:
      matchLabels:
        team: platform
`, "apply", "-f", "-")
	kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=60s", "clusterwatchrule/roles")
	kubectl(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: viewer
  labels:
    team: platform
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
`, "apply", "-f", "-")
	content := waitFile(t, remote, filepath.Join("cluster", "_cluster", "rbac.authorization.k8s.io", "clusterroles", "viewer.yaml"),
		func(c string) bool { return strings.Contains(c, "kind: ClusterRole") })
	assert.NotContains(t, content, "namespace:")
	fsck(t, remote)
}

func TestUnsupportedFolderIsStalledNamingTheFile(t *testing.T) {
	remote := newRemote(t)
	// Seed the remote with a shell script in the target folder, using the git CLI.
	seed := t.TempDir()
	for _, args := range [][]string{
		{"clone", remote, "."},
		{"checkout", "-b", "main"},
	} {
		out, err := execGit(seed, args...)
		require.NoError(t, err, out)
	}
	require.NoError(t, writeFile(filepath.Join(seed, "live", "run.sh"), "#!/bin/sh\necho hi\n"))
	for _, args := range [][]string{
		{"add", "live/run.sh"},
		{"-c", "user.name=Human", "-c", "user.email=h@example.com", "commit", "-m", "add a script"},
		{"push", "origin", "main"},
	} {
		out, err := execGit(seed, args...)
		require.NoError(t, err, out)
	}

	startOperator(t, t.TempDir())
	kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: team-d
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: GitProvider
metadata:
  name: repo
  namespace: team-d
spec:
  url: %s
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: live
  namespace: team-d
spec:
  providerRef:
    name: repo
  branch: main
  path: live
`, remoteURL(t, remote)), "apply", "-f", "-")
	kubectl(t, "", "-n", "team-d", "wait", "--for=condition=Stalled", "--timeout=60s", "gittarget/live")
	msg := kubectl(t, "", "-n", "team-d", "get", "gittarget", "live", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].message}`)
	assert.Contains(t, msg, "live/run.sh")
}

func TestDeletingAWatchRuleLeavesTheFilesOfItsObjects(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	// Quiet long enough that the rule's deletion reaches the writer before the window
	// closes, even on a loaded machine.
	setupTarget(t, "rule-gone", remote, "live", "8s")
	watchConfigMaps(t, "rule-gone", "")
	cm := func(value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: rule-gone\ndata:\n  greeting: " + value + "\n"
	}
	kubectl(t, cm("one"), "apply", "-f", "-")
	path := "live/rule-gone/configmaps/app.yaml"
	waitFile(t, remote, path, func(c string) bool { return strings.Contains(c, "greeting: one") })
	before := commits(t, remote)

	kubectl(t, cm("two"), "apply", "-f", "-") // waits 8 s in its window
	time.Sleep(time.Second)
	kubectl(t, "", "-n", "rule-gone", "delete", "watchrule", "configmaps")
	time.Sleep(16 * time.Second) // the window's time, twice: a wrong deletion would have landed

	content, ok := fileAt(remote, path)
	require.True(t, ok, "a deleted rule is no deleted object: the file stays")
	assert.Contains(t, content, "greeting: one")
	assert.Equal(t, before, commits(t, remote))
}

func TestAClusterWatchRuleCapturesObjectsAppliedTogetherWithTheirNamespace(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "platform-ns", remote, "cluster", "0s")
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: ClusterWatchRule
metadata:
  name: team-configmaps
spec:
  targetRef:
    namespace: platform-ns
    name: live
  rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    namespaceSelector:
      matchLabels:
        team: fresh
`, "apply", "-f", "-")
	kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=60s", "clusterwatchrule/team-configmaps")
	// One apply: the ConfigMap's events can reach the operator before its caches know the
	// namespace and its labels.
	var manifest strings.Builder
	for i := range 5 {
		fmt.Fprintf(&manifest, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: fresh-%d\n  labels:\n    team: fresh\n---\n", i)
		fmt.Fprintf(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: fresh-%d\ndata:\n  k: v\n---\n", i)
	}
	kubectl(t, manifest.String(), "apply", "-f", "-")
	for i := range 5 {
		waitFile(t, remote, fmt.Sprintf("cluster/fresh-%d/configmaps/settings.yaml", i), func(c string) bool { return strings.Contains(c, "k: v") })
	}

	// A namespace's labels decide too: one that leaves the selector takes its objects out of
	// Git, one that joins brings them in, with no change to the objects themselves.
	kubectl(t, "", "label", "namespace", "fresh-0", "team-")
	eventually(t, commitWait, "fresh-0's document removed", func() (bool, string) {
		_, ok := fileAt(remote, "cluster/fresh-0/configmaps/settings.yaml")
		return !ok, "still present"
	})
	kubectl(t, "", "create", "namespace", "joins-later")
	kubectl(t, "", "-n", "joins-later", "create", "configmap", "settings", "--from-literal=k=v")
	kubectl(t, "", "label", "namespace", "joins-later", "team=fresh")
	waitFile(t, remote, "cluster/joins-later/configmaps/settings.yaml", func(c string) bool { return strings.Contains(c, "k: v") })
}
