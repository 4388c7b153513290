package controller_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// releaseWhenDone clears gt's finalizers once the test ends, as the garbage collector (which
// envtest does not run) or another controller would, so that its deletion completes.
func releaseWhenDone(t *testing.T, gt *v1alpha1.GitTarget) {
	t.Helper()
	t.Cleanup(func() {
		// A merge patch, not an update: the controller may write the GitTarget meanwhile, and
		// an update from a read a moment before would conflict.
		release := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		require.NoError(t, k8s.Patch(context.Background(), gt.DeepCopy(), release))
	})
}

func TestAGitTargetBeingDeletedHoldsNoPlace(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, provider(ns, "file://"+bareRemote(t))))
	gt := target(ns, "main", "live")
	gt.Finalizers = []string{"test.example.com/keep"} // envtest has no garbage collector to wait for
	require.NoError(t, k8s.Create(ctx, gt))
	releaseWhenDone(t, gt)
	_, places, err := controller.ListPlaces(ctx, k8s)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(places, func(p controller.Place) bool { return p.Key == client.ObjectKeyFromObject(gt) }))

	generation := gt.Generation
	require.NoError(t, k8s.Delete(ctx, gt))
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(gt), gt))
	assert.Greater(t, gt.Generation, generation, "the deletion changes its generation, which looks at the GitTargets it kept out")
	_, places, err = controller.ListPlaces(ctx, k8s)
	require.NoError(t, err)
	assert.False(t, slices.ContainsFunc(places, func(p controller.Place) bool { return p.Key == client.ObjectKeyFromObject(gt) }),
		"it stopped writing: a new GitTarget may take its folder")

}

// A GitTarget deleted and created again under its name (`kubectl replace --force`, a
// delete and apply) keeps the deletes seen before its registration completes: it waits here
// behind another GitTarget's fetch of the branch (batch.ErrRemoteBusy), as it may for its
// old clone's removal or a transient error.
func TestAGitTargetCreatedAgainKeepsTheDeletesSeenBeforeItRegisters(t *testing.T) {
	ctx := context.Background()
	var hang atomic.Bool
	hung, release := make(chan struct{}), make(chan struct{})
	var hungOnce, releaseOnce sync.Once
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				hungOnce.Do(func() { close(hung) })
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			next.ServeHTTP(w, r)
		})
	}))
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the server stops
	const doc = "live/app/configmaps/a.yaml"
	remote.Seed("main", map[string]string{doc: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n"}, "seed")
	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, provider(ns, remote.URL)))
	gt := target(ns, "main", "live")
	require.NoError(t, k8s.Create(ctx, gt))
	waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
	key := client.ObjectKeyFromObject(gt)
	require.NoError(t, k8s.Delete(ctx, gt))
	require.Eventually(t, func() bool { _, registered := writer.Status(key); return !registered }, 10*time.Second, 20*time.Millisecond)

	hang.Store(true)
	holder := target(ns, "main", "other")
	holder.Name = "other"
	require.NoError(t, k8s.Create(ctx, holder)) // its first fetch holds the branch's registrations
	select {
	case <-hung:
	case <-time.After(time.Minute):
		t.Fatal("the other GitTarget never fetched")
	}
	again := target(ns, "main", "live")
	require.NoError(t, k8s.Create(ctx, again))
	waitConditionSaying(t, again, func() []metav1.Condition { return again.Status.Conditions }, v1alpha1.ConditionReconciling,
		metav1.ConditionTrue, "has not answered")
	_, registered := writer.Status(key)
	require.False(t, registered, "it waits behind the other's fetch")
	writer.Submit(batch.Change{Target: key, Deleted: true, Author: "alice",
		Key: batch.ObjectKey{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "app", Name: "a"}})

	letGo()
	require.Eventually(t, func() bool { return !strings.Contains(remote.LsTree("main"), doc) }, time.Minute, 100*time.Millisecond,
		"the delete reaches Git once the GitTarget registers")
}
