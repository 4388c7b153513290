package batch_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestAPushThatFindsAPersonsCommitOnTheSameFileReplaysOnTopOfIt(t *testing.T) {
	const file = "live/app/configmaps/app.yaml"
	var racing atomic.Bool
	var remote *repotest.Remote
	remote = repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Query().Get("service") == "git-receive-pack" && racing.CompareAndSwap(true, false) {
				// Between the writer's plan and its push, a person edits the same file: a
				// comment, and a value the cluster also changed. And adds a file of their own.
				doc := remote.Show("main", file)
				remote.Seed("main", map[string]string{
					file:             "# team A owns this ConfigMap\n" + strings.Replace(doc, "k: v1", "k: edited-in-git", 1) + "\n",
					"live/README.md": "objects, and a note from a person\n",
				}, "a person's commit")
			}
			next.ServeHTTP(w, r)
		})
	}))
	writer, c := liveWriter(t, remote)
	spec := targetSpec(t, "live", remote.URL, nil)
	spec.Window = batch.WindowConfig{Quiet: 10 * time.Millisecond, MaxDelay: time.Hour, MaxChanges: 100}
	_, err := writer.EnsureTarget(context.Background(), spec)
	require.NoError(t, err)
	app := c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v1", "other": "x"})
	writer.Submit(batch.Change{Target: targetKey, Key: app, Author: "alice"})
	require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), file) }, 10*time.Second, 20*time.Millisecond)

	racing.Store(true)
	c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v2", "other": "x"})
	writer.Submit(batch.Change{Target: targetKey, Key: app, Author: "alice"})
	require.Eventually(t, func() bool { return strings.Contains(remote.Show("main", file), "k: v2") }, 10*time.Second, 20*time.Millisecond)

	require.False(t, racing.Load(), "the person's commit raced the push")
	log := remote.Log("main")
	require.Len(t, log, 4, "seed, alice's first commit, the person's, alice's replayed on top")
	assert.Contains(t, log[1], "a person's commit")
	assert.Empty(t, repotest.Git(t, remote.Dir, "rev-list", "--merges", "main"), "linear history: never a merge commit")
	doc := remote.Show("main", file)
	assert.True(t, strings.HasPrefix(doc, "# team A owns this ConfigMap\n"), "the person's comment is kept:\n%s", doc)
	assert.Contains(t, doc, "k: v2", "on the same value the API state wins")
	assert.NotContains(t, doc, "edited-in-git")
	assert.Equal(t, "objects, and a note from a person", remote.Show("main", "live/README.md"), "the person's other file is kept")
	repotest.Git(t, remote.Dir, "fsck", "--strict")
}
