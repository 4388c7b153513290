package controller_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

// releaseWhenDone clears gt's finalizers once the test ends, as the garbage collector (which
// envtest does not run) or another controller would, so that its deletion completes.
func releaseWhenDone(t *testing.T, gt *v1alpha1.GitTarget) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		var now v1alpha1.GitTarget
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(gt), &now))
		now.Finalizers = nil
		require.NoError(t, k8s.Update(ctx, &now))
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
