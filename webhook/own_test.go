package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestOverlaps(t *testing.T) {
	p := func(url, branch, folder string) Place { return Place{URL: url, Branch: branch, Folder: folder} }
	cases := []struct {
		name string
		a, b Place
		want bool
	}{
		{"refuses equal folders on one repository and branch", p("r", "main", "live"), p("r", "main", "live"), true},
		{"refuses a folder nested in another", p("r", "main", "live"), p("r", "main", "live/team"), true},
		{"refuses a folder around another", p("r", "main", "live/team"), p("r", "main", "live"), true},
		{"allows sibling folders that share a prefix", p("r", "main", "live"), p("r", "main", "live2"), false},
		{"allows the same folder on another branch", p("r", "main", "live"), p("r", "dev", "live"), false},
		{"allows the same folder in another repository", p("r", "main", "live"), p("s", "main", "live"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Overlaps(tc.a, tc.b))
		})
	}
}

func TestValidateTarget(t *testing.T) {
	provider := &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "repo"},
		Spec: v1alpha1.GitProviderSpec{URL: "https://git.example.com/r.git", AllowedBranches: []string{"main"}}}
	target := func(name, branch, path string) *v1alpha1.GitTarget {
		return &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name},
			Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: branch, Path: path}}
	}
	existing := []Place{{Key: types.NamespacedName{Namespace: "b", Name: "live"}, URL: "https://git.example.com/r", Branch: "main", Folder: "clusters/prod"}}

	assert.NoError(t, ValidateTarget(target("t", "main", "clusters/dev"), provider, existing))
	assert.NoError(t, ValidateTarget(target("t", "feature", "x"), nil, existing), "a missing provider is the reconciler's to report")
	err := ValidateTarget(target("t", "feature", "x"), provider, existing)
	assert.ErrorContains(t, err, `branch "feature" is not allowed by GitProvider a/repo`)
	err = ValidateTarget(target("t", "main", "clusters/prod/team"), provider, existing)
	assert.ErrorContains(t, err, `overlaps folder "clusters/prod" of GitTarget b/live`, "URLs are compared normalised")
	bad := target("t", "main", "clusters/dev")
	bad.Spec.CommitMessage.Group = "{{.Nope}}"
	assert.ErrorContains(t, ValidateTarget(bad, provider, existing), "spec.commitMessage")
	same := []Place{{Key: types.NamespacedName{Namespace: "a", Name: "t"}, URL: "https://git.example.com/r", Branch: "main", Folder: "clusters/prod"}}
	assert.NoError(t, ValidateTarget(target("t", "main", "clusters/prod"), provider, same), "an update never overlaps itself")
}
