package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestKeySecrets(t *testing.T) {
	target := func(ageSecret string) *v1alpha1.GitTarget {
		t := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "live"}}
		t.Spec.Encryption = &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{Recipients: []string{"age1x"}}}
		if ageSecret != "" {
			t.Spec.Encryption.Age.SecretRef = &v1alpha1.LocalObjectReference{Name: ageSecret}
		}
		return t
	}
	provider := func(secret string) *v1alpha1.GitProvider {
		p := &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "repo"}}
		if secret != "" {
			p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: secret}
		}
		return p
	}
	name := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "team-a", Name: n} }
	for _, tc := range []struct {
		name     string
		target   *v1alpha1.GitTarget
		provider *v1alpha1.GitProvider
		want     []types.NamespacedName
	}{
		{"names only the digest key when neither keeps a Secret", target(""), provider(""),
			[]types.NamespacedName{name("live" + DigestSecretSuffix)}},
		{"names the age identities and the GitProvider's Git credentials", target("age-keys"), provider("git-auth"),
			[]types.NamespacedName{name("live" + DigestSecretSuffix), name("age-keys"), name("git-auth")}},
		{"names the Git credentials of a target without identities", target(""), provider("git-auth"),
			[]types.NamespacedName{name("live" + DigestSecretSuffix), name("git-auth")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, keySecrets(tc.target, tc.provider))
		})
	}
}
