package batch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// runWriter starts a writer on workDir that abandons its open windows when stopped, as a
// kill -9 does (the process itself cannot be killed inside a test: what a kill leaves is
// the work directory, which the next writer reads); stop ends it.
func runWriter(t *testing.T, workDir string, c *cluster) (writer *batch.Manager, stop func()) {
	t.Helper()
	writer = batch.NewManager(batch.Options{Resolver: c, Log: logr.Discard(), WorkDir: workDir, DrainTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = writer.Start(ctx); close(done) }()
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return writer, stop
}

func TestADeletionSeenBeforeAKillIsWrittenAfterTheRestart(t *testing.T) {
	const file = "live/app/configmaps/gone.yaml"
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{file: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gone\n  namespace: app\ndata:\n  k: v\n"}, "seed")
	c := &cluster{objs: map[batch.ObjectKey]*unstructured.Unstructured{}} // ConfigMap app/gone was deleted
	workDir := t.TempDir()
	spec := targetSpec(t, "live", remote.URL, nil) // windows that wait an hour
	spec.Prune = batch.PruneOnEvent                // the default: a snapshot keeps orphans

	writer, kill := runWriter(t, workDir, c)
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	gone := batch.ObjectKey{GVR: cmGVR, Kind: "ConfigMap", Namespace: "app", Name: "gone"}
	writer.Submit(batch.Change{Target: targetKey, Key: gone, Deleted: true, Author: "alice"})
	kill()
	require.Contains(t, remote.LsTree("main"), file, "killed before its window closed")

	writer, _ = runWriter(t, workDir, c)
	spec.Window = batch.WindowConfig{Quiet: 10 * time.Millisecond, MaxDelay: time.Hour, MaxChanges: 100}
	_, err = writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	// The first list of ConfigMaps comes from a rule for another namespace: the rule that
	// routes app's ConfigMaps to the target is not registered yet.
	c.setWatched(gone, false)
	writer.Snapshot(batch.Snapshot{Target: targetKey, GVR: cmGVR, Kind: "ConfigMap", InScope: func(ns string) bool { return ns == "elsewhere" }})
	// Alice changes another object: her window commits, and a deletion of hers handed over
	// at registration, or with that list, would have gone with it unwritten.
	other := c.put(cmGVR, "ConfigMap", "other", map[string]any{"k": "v"})
	writer.Submit(batch.Change{Target: targetKey, Key: other, Author: "alice"})
	require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/other.yaml") },
		10*time.Second, 20*time.Millisecond)
	require.Contains(t, remote.LsTree("main"), file, "kept until a list of its namespace shows the watcher knows its rules")
	c.setWatched(gone, true)
	writer.Snapshot(batch.Snapshot{Target: targetKey, GVR: cmGVR, Kind: "ConfigMap", InScope: func(string) bool { return true }})
	require.Eventually(t, func() bool { return !strings.Contains(remote.LsTree("main"), file) }, 10*time.Second, 20*time.Millisecond,
		"the deletion the first process accepted reaches Git")
	assert.Contains(t, remote.Log("main")[0], "Delete ConfigMap app/gone")
	assert.Contains(t, repotest.Git(t, remote.Dir, "log", "-1", "--format=%an", "main"), "alice", "under its author")
}

// A CRD upgraded while the operator was down may serve its resource at a new preferred
// version: the rules resolve to it after the restart, and the watcher knows the objects by
// that version only.
func TestADeletionSeenBeforeAKillIsWrittenWhenItsResourceComesBackAtAnotherVersion(t *testing.T) {
	const file = "live/app/widget.example.io/w1.yaml"
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{file: "apiVersion: example.io/v1beta1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: app\nspec:\n  size: 1\n"}, "seed")
	c := &cluster{objs: map[batch.ObjectKey]*unstructured.Unstructured{}}
	workDir := t.TempDir()
	spec := targetSpec(t, "live", remote.URL, nil)
	spec.Prune = batch.PruneOnEvent

	writer, kill := runWriter(t, workDir, c)
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	old := batch.ObjectKey{GVR: schema.GroupVersionResource{Group: "example.io", Version: "v1beta1", Resource: "widgets"}, Kind: "Widget", Namespace: "app", Name: "w1"}
	writer.Submit(batch.Change{Target: targetKey, Key: old, Deleted: true, Author: "alice"})
	kill()
	require.Contains(t, remote.LsTree("main"), file, "killed before its window closed")

	current := old
	current.GVR.Version = "v1"
	c.setWatched(old, false) // no informer for the old version any more
	writer, stop := runWriter(t, workDir, c)
	spec.Window = batch.WindowConfig{Quiet: 10 * time.Millisecond, MaxDelay: time.Hour, MaxChanges: 100}
	_, err = writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	writer.Snapshot(batch.Snapshot{Target: targetKey, GVR: current.GVR, Kind: "Widget", Complete: true, InScope: func(string) bool { return true }})
	require.Eventually(t, func() bool { return !strings.Contains(remote.LsTree("main"), file) }, 10*time.Second, 20*time.Millisecond,
		"the deletion the first process accepted reaches Git")
	assert.Contains(t, repotest.Git(t, remote.Dir, "log", "-1", "--format=%an", "main"), "alice", "under its author")

	// The journal forgets it: a third process hands nothing over. The second one records
	// that once its push has returned, right after status has the commit; a stop while the
	// push still waits for the server's answer would leave it for the next process to find
	// delivered (at least once), so the test waits for status, then stops the writer.
	require.Eventually(t, func() bool {
		st, ok := writer.Status(targetKey)
		return ok && st.LastCommit.String() == remote.Head("main")
	}, 10*time.Second, 20*time.Millisecond, "the second process took its push in")
	stop()
	writer, _ = runWriter(t, workDir, c)
	assert.Zero(t, writer.RecoveredDeletions(), "nothing left pending")
}
