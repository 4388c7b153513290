package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// A remote that accepts a fetch and stops answering holds the reconcile of the GitTarget
// fetching up to the writer's Git timeout (2 minutes here); the other targets of its branch,
// more than the controller reconciles at once, wait for that fetch only so long
// (batch.ErrRemoteBusy), and another tenant's GitTarget registers meanwhile, not after it.
func TestAGitTargetWhoseRemoteStopsAnsweringDoesNotHoldBackOthers(t *testing.T) {
	ctx := context.Background()
	var hang atomic.Bool
	hung, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stuck := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				once.Do(func() { close(hung) })
				select { // until the test ends: the server's Stop waits for its requests
				case <-release:
				case <-r.Context().Done():
				}
			}
			next.ServeHTTP(w, r)
		})
	}))
	t.Cleanup(func() { close(release) }) // before the server stops
	stuck.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	hang.Store(true)
	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, provider(ns, stuck.URL)))
	first := target(ns, "main", "live")
	require.NoError(t, k8s.Create(ctx, first))
	<-hung
	for i := range controller.DefaultConcurrent { // one more than the controller reconciles at once
		gt := target(ns, "main", fmt.Sprintf("team-%d", i))
		gt.Name = gt.Spec.Path
		require.NoError(t, k8s.Create(ctx, gt))
	}

	other := provider(ns, "file://"+bareRemote(t))
	other.Name = "other"
	require.NoError(t, k8s.Create(ctx, other))
	gt := target(ns, "main", "live")
	gt.Name, gt.Spec.ProviderRef.Name = "other", other.Name
	require.NoError(t, k8s.Create(ctx, gt))

	waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
	waiting := target(ns, "main", "team-0")
	waiting.Name = "team-0"
	waitConditionSaying(t, waiting, func() []metav1.Condition { return waiting.Status.Conditions }, v1alpha1.ConditionReconciling,
		metav1.ConditionTrue, "has not answered")
}
