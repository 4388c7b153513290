package batch_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestACommitRequestSaysWhyItsMessageIsNotCommittedYet(t *testing.T) {
	t.Run("reports Retrying with the push error while the remote refuses, then the commit with the message", func(t *testing.T) {
		var refuse atomic.Bool
		remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if refuse.Load() && repotest.IsReceivePack(r) {
					http.Error(w, "the remote is down for maintenance", http.StatusServiceUnavailable)
					return
				}
				next.ServeHTTP(w, r)
			})
		}))
		remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
		c := &cluster{objs: map[batch.ObjectKey]*unstructured.Unstructured{}}
		writer := batch.NewManager(batch.Options{Resolver: c, Log: logr.Discard(), WorkDir: t.TempDir()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = writer.Start(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		msgs, err := batch.ParseMessages("", "")
		require.NoError(t, err)
		_, err = writer.EnsureTarget(ctx, batch.TargetSpec{Key: targetKey, URL: remote.URL, Branch: "main", Folder: "live",
			Messages: msgs, Window: batch.WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour, MaxChanges: 100},
			Committer: batch.Identity{Name: "Writer", Email: "w@example.com"}})
		require.NoError(t, err)

		refuse.Store(true)
		writer.Submit(batch.Change{Target: targetKey, Key: c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}), AllowDelete: true, Author: "alice"})
		req := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: targetKey, Author: "alice",
			Message: "release 1.2", Deadline: time.Now().Add(time.Minute)}
		_, err = writer.Request(req)
		require.NoError(t, err)

		var out batch.RequestOutcome
		require.Eventually(t, func() bool {
			out, err = writer.Request(req)
			return err == nil && out.Reason == batch.ReasonRetrying
		}, 10*time.Second, 50*time.Millisecond, "the request learns that its commit failed")
		assert.False(t, out.Done, "not final: the commit is retried")
		assert.Contains(t, out.Message, "503")

		refuse.Store(false)
		require.Eventually(t, func() bool {
			out, err = writer.Request(req)
			return err == nil && out.Done
		}, 15*time.Second, 100*time.Millisecond, "the retried commit carries the message")
		assert.Equal(t, batch.ReasonCommitted, out.Reason)
		assert.Contains(t, remote.Log("main")[0], "release 1.2")
	})
}
