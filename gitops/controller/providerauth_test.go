package controller_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

// sshSecret creates the Secret "ssh" in ns: a key and known_hosts for 127.0.0.1:2222.
func sshSecret(t *testing.T, ns string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	hostKey, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	require.NoError(t, k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ssh"},
		Data: map[string][]byte{"identity": sshKey(t), "known_hosts": append([]byte("[127.0.0.1]:2222 "), ssh.MarshalAuthorizedKey(hostKey)...)}}))
}

func TestProviderAuthRetriesWhatIsNotTheSecretsFault(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sshSecret(t, ns)
	p := provider(ns, "ssh://git@127.0.0.1:2222/repo.git")
	p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "ssh"}

	_, _, err := controller.ProviderAuth(ctx, k8s, p)
	require.NoError(t, err, "a valid Secret")
	// Faked: a full disk cannot be caused here; a temporary directory that does not exist
	// fails the same write of known_hosts to a temporary file.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	_, _, err = controller.ProviderAuth(ctx, k8s, p)
	require.Error(t, err)
	assert.NotErrorIs(t, err, controller.ErrCredentials, "no Secret to fix: retried with backoff, not Stalled")
}

func TestProviderAuthRefusesASecretWithoutCredentialsForHTTP(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"},
		Data: map[string][]byte{"token": []byte("ghp_S3CRET")}}))
	p := provider(ns, "https://git.example.com/org/repo.git")
	p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "token"}

	_, _, err := controller.ProviderAuth(ctx, k8s, p)
	require.ErrorIs(t, err, controller.ErrCredentials, "Stalled with InvalidSecret, not anonymous access")
	assert.Contains(t, err.Error(), "set username and password, or bearerToken (it has keys token)")
	assert.NotContains(t, err.Error(), "ghp_S3CRET")

	p.Spec.URL = "https://bot:PASSW0RD@git.example.com/org/repo.git"
	_, _, err = controller.ProviderAuth(ctx, k8s, p)
	require.NoError(t, err, "the URL's user info are credentials")
}

func TestAProviderWhoseCredentialsCannotBeBuiltForNowIsReconcilingNotReady(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sshSecret(t, ns)
	// Faked as above: a full disk cannot be caused here.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	p := provider(ns, "ssh://git@127.0.0.1:2222/repo.git")
	p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "ssh"}
	require.NoError(t, k8s.Create(ctx, p))

	msg := waitConditionSaying(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionReconciling, metav1.ConditionTrue, "retrying")
	assert.Contains(t, msg, "building credentials from Secret")
	c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c, "Ready says so too")
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha1.ReasonRetrying, c.Reason)
}
