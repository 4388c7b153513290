package controller_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

// opaqueURL holds a token with a "/" left unescaped: url.Parse would read the rest of it as
// the path, so the writer never dials it (repo.ErrOpaqueURL).
const opaqueURL = "https://robot:t0k/EN-SECRET@git.example.com/org/repo.git"

// storedBeforeTheURLRule is a client holding objects the real API server refuses: the
// CRD's CEL rules reject every URL the writer cannot take apart, so a provider with one
// exists only when it was stored before those rules (or on a server without CRD
// validation). controller-runtime's fake client is the only way to cause that here; every
// other controller test runs against envtest's API server.
func storedBeforeTheURLRule(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.GitProvider{}, &v1alpha1.GitTarget{}).Build()
}

func TestAURLTheWriterCannotTakeApartStallsWithoutDialling(t *testing.T) {
	provider := &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "git", Generation: 1},
		Spec: v1alpha1.GitProviderSpec{URL: opaqueURL}}
	target := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "live", Generation: 1},
		Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "git"}, Branch: "main", Path: "live"}}
	c := storedBeforeTheURLRule(t, provider, target)
	ctx := context.Background()

	t.Run("the GitProvider is Stalled with reason InvalidURL, naming the fix and not the token", func(t *testing.T) {
		r := &controller.GitProviderReconciler{Client: c}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "git"}})
		require.NoError(t, err, "a configuration error is not retried")
		assert.Zero(t, res.RequeueAfter)
		var got v1alpha1.GitProvider
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(provider), &got))
		stalled := requireStalled(t, got.Status.Conditions, v1alpha1.ReasonInvalidURL)
		assert.Contains(t, stalled.Message, "move the credentials into the GitProvider's Secret")
		assert.NotContains(t, stalled.Message, "SECRET")
		assert.False(t, apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady))
	})

	t.Run("its GitTarget is Stalled with reason ProviderNotReady and the writer never registers it", func(t *testing.T) {
		writer := batch.NewManager(batch.Options{WorkDir: t.TempDir(), Log: logr.Discard()})
		r := &controller.GitTargetReconciler{Client: c, Writer: writer}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "live"}})
		require.NoError(t, err, "a configuration error is not retried")
		var got v1alpha1.GitTarget
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(target), &got))
		stalled := requireStalled(t, got.Status.Conditions, v1alpha1.ReasonProviderNotReady)
		assert.Contains(t, stalled.Message, "GitProvider team-a/git")
		assert.NotContains(t, stalled.Message, "SECRET")
		assert.Empty(t, writer.Locate(client.ObjectKeyFromObject(target), v1alpha1.GroupVersion.WithResource("x"), "X", "team-a", "x").Path,
			"not written for")
	})
}

// Stored before the CRD's rules refused them: the fake client, as for the URL above.
func TestASpecStoredBeforeTheRulesStallsTheGitTarget(t *testing.T) {
	cases := []struct {
		name, branch, path, reason, message string
	}{
		{"stalls a branch Git refuses", "env//prod", "live", v1alpha1.ReasonBranchNotAllowed, `branch "env//prod" is not a valid Git branch name`},
		{"stalls a path with a .git segment", "main", "live/.Git/hooks", v1alpha1.ReasonPathNotAllowed, `"live/.Git/hooks" enters the .git directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			provider := &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "git", Generation: 1},
				Spec: v1alpha1.GitProviderSpec{URL: "file:///nonexistent/repo.git"}}
			target := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "live", Generation: 1},
				Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "git"}, Branch: tc.branch, Path: tc.path}}
			c := storedBeforeTheURLRule(t, provider, target)
			writer := batch.NewManager(batch.Options{WorkDir: t.TempDir(), Log: logr.Discard()})
			r := &controller.GitTargetReconciler{Client: c, Writer: writer}

			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(target)})
			require.NoError(t, err, "a configuration error is not retried")
			var got v1alpha1.GitTarget
			require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(target), &got))
			stalled := requireStalled(t, got.Status.Conditions, tc.reason)
			assert.Contains(t, stalled.Message, tc.message)
			assert.Empty(t, writer.Locate(client.ObjectKeyFromObject(target), v1alpha1.GroupVersion.WithResource("x"), "X", "team-a", "x").Path,
				"not written for")
		})
	}
}

// requireStalled returns the Stalled condition of conds, which must have reason.
func requireStalled(t *testing.T, conds []metav1.Condition, reason string) *metav1.Condition {
	t.Helper()
	stalled := apimeta.FindStatusCondition(conds, v1alpha1.ConditionStalled)
	require.NotNil(t, stalled)
	require.Equal(t, reason, stalled.Reason)
	return stalled
}
