package batch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestTargetsOfOneBranchUseTheirOwnCredentials(t *testing.T) {
	t.Run("pushes each target's changes with its own provider's credentials, whichever registered last", func(t *testing.T) {
		remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
		remote.Seed("main", map[string]string{"live/README.md": "objects\n", "other/README.md": "objects\n"}, "seed")
		c := &cluster{objs: map[batch.ObjectKey]*unstructured.Unstructured{}}
		writer := batch.NewManager(batch.Options{Resolver: c, Log: logr.Discard(), WorkDir: t.TempDir()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = writer.Start(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })

		msgs, err := batch.ParseMessages("", "")
		require.NoError(t, err)
		good := &githttp.BasicAuth{Username: "alice", Password: "s3cret"}
		spec := func(name, folder string, auth transport.AuthMethod) batch.TargetSpec {
			return batch.TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: name}, URL: remote.URL, Branch: "main",
				Folder: folder, Messages: msgs, Window: batch.WindowConfig{MaxChanges: 100},
				Committer: batch.Identity{Name: "Writer", Email: "w@example.com"}, Auth: auth}
		}
		live, other := spec("live", "live", good), spec("other", "other", good)
		for _, s := range []batch.TargetSpec{other, live} {
			_, err := writer.EnsureTarget(ctx, s)
			require.NoError(t, err)
		}
		// other's provider now holds a token the remote refuses (rotated, read-only); it
		// registers after live, so a shared clone would push live's changes with it.
		other.Auth = &githttp.BasicAuth{Username: "alice", Password: "read-only"}
		_, _ = writer.EnsureTarget(ctx, other)

		app := c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"})
		writer.Submit(batch.Change{Target: live.Key, Key: app, AllowDelete: true})
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/app.yaml") },
			10*time.Second, 50*time.Millisecond, "live pushes with its own credentials")

		// live registers again (its periodic reconcile), after other: other's changes must
		// still go out with other's credentials, and fail.
		_, err = writer.EnsureTarget(ctx, live)
		require.NoError(t, err)
		writer.Submit(batch.Change{Target: other.Key, Key: app, AllowDelete: true})
		require.Eventually(t, func() bool {
			st, _ := writer.Status(other.Key)
			return st.LastError != ""
		}, 10*time.Second, 50*time.Millisecond, "other's push fails with other's credentials")
		assert.NotContains(t, remote.LsTree("main"), "other/app", "never pushed with live's credentials")
	})
}
