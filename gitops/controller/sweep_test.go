package controller_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

// TestClonesInUse: the repository, branch, folder and name of every GitTarget; no repository for
// one whose GitProvider is missing.
func TestClonesInUse(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	url := "file://" + bareRemote(t)
	require.NoError(t, k8s.Create(ctx, provider(ns, url, "main", "env/*")))
	require.NoError(t, k8s.Create(ctx, target(ns, "main", "live")))
	prod := target(ns, "env/prod", "prod")
	prod.Name = "prod"
	require.NoError(t, k8s.Create(ctx, prod))
	orphan := target(ns, "main", "orphans/"+ns) // folders unique to this test, to find them
	orphan.Name, orphan.Spec.ProviderRef = "orphan", v1alpha1.LocalObjectReference{Name: "missing"}
	require.NoError(t, k8s.Create(ctx, orphan))
	var elsewhere string
	t.Run("elsewhere", func(t *testing.T) {
		// A GitProvider of the same name in another namespace is not this target's.
		elsewhere = namespace(t)
		require.NoError(t, k8s.Create(ctx, target(elsewhere, "other", "elsewhere/"+ns)))
	})

	inUse, err := controller.ClonesInUse(ctx, k8s)
	require.NoError(t, err)
	var mine []batch.Clone
	for _, c := range inUse {
		if c.URL == url || strings.HasSuffix(c.Folder, "/"+ns) {
			mine = append(mine, c)
		}
	}
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	assert.ElementsMatch(t, []batch.Clone{{URL: url, Branch: "main", Folder: "live", Target: key(ns, "live")},
		{URL: url, Branch: "env/prod", Folder: "prod", Target: key(ns, "prod")},
		{Branch: "main", Folder: "orphans/" + ns, Target: key(ns, "orphan")},
		{Branch: "other", Folder: "elsewhere/" + ns, Target: key(elsewhere, "live")}}, mine,
		"a target whose GitProvider is missing, here or in its own namespace, has no repository")
}
