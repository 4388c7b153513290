package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/redact"
)

// Annotations the operator puts on a Secret that received a generated identity. The public
// key is safe to show; the private key never leaves the Secret's data.
const (
	AnnotationAgePublicKey = "reverser.gitops.dev/age-public-key"
	AnnotationBackup       = "reverser.gitops.dev/backup"
	// GeneratedIdentityKey is the data key a generated identity is stored under; the
	// .agekey suffix is what Flux's kustomize-controller reads too.
	GeneratedIdentityKey = "identity" + encrypt.IdentitySuffix
	// DigestSecretSuffix names the Secret holding a target's digest key
	// (v1alpha1.DigestSecretSuffix).
	DigestSecretSuffix = v1alpha1.DigestSecretSuffix
	// DigestKeyField is the data key of the digest key in that Secret.
	DigestKeyField = "digest.key"
	// ReasonAgeIdentityGenerated is the reason of the Warning Event emitted when an identity
	// was generated.
	ReasonAgeIdentityGenerated = "AgeIdentityGenerated"
)

// backupWarning is the annotation and Event text that tells people to keep the key safe.
const backupWarning = "this Secret holds the only copy of an age private key that decrypts " +
	"the GitTarget's files in Git; back it up outside the cluster"

// encryptionVerdict is what EncryptionReady says; ready is false with a reason naming what
// to fix.
type encryptionVerdict struct {
	ready   bool
	reason  string
	message string
}

// notReady builds a verdict for a configuration problem.
func notReady(reason, format string, args ...any) encryptionVerdict {
	return encryptionVerdict{reason: reason, message: fmt.Sprintf(format, args...)}
}

// sensitiveResources converts the spec's list for the writer.
func sensitiveResources(t *v1alpha1.GitTarget) []schema.GroupResource {
	if t.Spec.Encryption == nil {
		return nil
	}
	out := make([]schema.GroupResource, 0, len(t.Spec.Encryption.SensitiveResources))
	for _, gr := range t.Spec.Encryption.SensitiveResources {
		out = append(out, schema.GroupResource{Group: gr.Group, Resource: gr.Resource})
	}
	return out
}

// resolveEncryption reads the target's keys; p is its GitProvider. Configuration problems
// come back as a verdict (and a nil Encryption) so the caller reports them without retrying
// hot; only transient API errors are returned as errors.
func (r *GitTargetReconciler) resolveEncryption(ctx context.Context, t *v1alpha1.GitTarget, p *v1alpha1.GitProvider) (*batch.Encryption, encryptionVerdict, error) {
	if t.Spec.Encryption == nil || t.Spec.Encryption.Age == nil {
		return nil, notReady(v1alpha1.ReasonEncryptionNotConfigured,
			"spec.encryption.age is not set: sensitive objects routed to this target are refused; "+
				"set spec.encryption.age.recipients or spec.encryption.age.secretRef"), nil
	}
	age := t.Spec.Encryption.Age
	ids, v, err := r.identities(ctx, t, age)
	if err != nil || v.reason != "" {
		return nil, v, err
	}
	recipients, err := encrypt.ParseRecipients(append(append([]string(nil), age.Recipients...), ids.Recipients()...))
	switch {
	case errors.Is(err, encrypt.ErrNoRecipients):
		return nil, notReady(v1alpha1.ReasonNoRecipients, "no age recipients: set spec.encryption.age.recipients or put an identity in the secretRef Secret"), nil
	case err != nil:
		return nil, notReady(v1alpha1.ReasonMalformedKey, "spec.encryption.age.recipients: %v", err), nil
	}
	enc := &batch.Encryption{Recipients: recipients, Identities: ids, KeySecrets: keySecrets(t, p)}
	if ids.Len() == 0 {
		if enc.DigestKey, v, err = r.digestKey(ctx, t); err != nil || v.reason != "" {
			return nil, v, err
		}
	}
	return enc, encryptionVerdict{ready: true, reason: v1alpha1.ReasonSucceeded,
		message: fmt.Sprintf("encrypting for %d age recipient(s): %s", len(recipients), strings.Join(recipients, ", "))}, nil
}

// keySecrets names the Secrets of target t the writer never writes, not even encrypted: its
// age identities, its digest key, and the Git credentials of its GitProvider p. The token
// that pushes to the repository does not belong in it: every recipient of the repository's
// Secrets could read it there.
func keySecrets(t *v1alpha1.GitTarget, p *v1alpha1.GitProvider) []types.NamespacedName {
	out := t.KeySecrets()
	if p != nil && p.Spec.SecretRef != nil {
		out = append(out, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.SecretRef.Name})
	}
	return out
}

// identities reads (or, with generateWhenMissing, creates) the identities of the secretRef
// Secret. No secretRef means no identities.
func (r *GitTargetReconciler) identities(ctx context.Context, t *v1alpha1.GitTarget, age *v1alpha1.AgeEncryption) (encrypt.Identities, encryptionVerdict, error) {
	if age.SecretRef == nil {
		return encrypt.Identities{}, encryptionVerdict{}, nil
	}
	key := types.NamespacedName{Namespace: t.Namespace, Name: age.SecretRef.Name}
	var s corev1.Secret
	err := r.Client.Get(ctx, key, &s)
	switch {
	case apierrors.IsNotFound(err) && age.GenerateWhenMissing:
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		return r.generateIdentity(ctx, t, &s, true)
	case apierrors.IsNotFound(err):
		return encrypt.Identities{}, notReady(v1alpha1.ReasonSecretNotFound,
			"Secret %s (spec.encryption.age.secretRef) not found: create it with an age identity under a key ending in %s, or set generateWhenMissing",
			key, encrypt.IdentitySuffix), nil
	case apierrors.IsForbidden(err):
		return encrypt.Identities{}, notReady(v1alpha1.ReasonSecretUnreadable,
			"Secret %s (spec.encryption.age.secretRef) cannot be read by the operator: grant it get on secrets in %s", key, key.Namespace), nil
	case err != nil:
		return encrypt.Identities{}, encryptionVerdict{}, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	ids, err := encrypt.ParseIdentities(s.Data)
	switch {
	case errors.Is(err, encrypt.ErrNoIdentity) && age.GenerateWhenMissing:
		return r.generateIdentity(ctx, t, &s, false)
	case errors.Is(err, encrypt.ErrNoIdentity):
		return encrypt.Identities{}, notReady(v1alpha1.ReasonNoIdentity,
			"Secret %s holds no age identity under a key ending in %s: add one, or set generateWhenMissing", key, encrypt.IdentitySuffix), nil
	case err != nil:
		return encrypt.Identities{}, notReady(v1alpha1.ReasonMalformedKey, "Secret %s: %v", key, err), nil
	}
	return ids, encryptionVerdict{}, nil
}

// generateIdentity puts a new X25519 identity into s (creating it when create is set),
// annotates it with the public key and a backup warning, and emits a Warning Event on the
// target naming the public key only.
func (r *GitTargetReconciler) generateIdentity(ctx context.Context, t *v1alpha1.GitTarget, s *corev1.Secret, create bool) (encrypt.Identities, encryptionVerdict, error) {
	private, public, err := encrypt.GenerateIdentity()
	if err != nil {
		return encrypt.Identities{}, encryptionVerdict{}, err
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if _, taken := s.Data[GeneratedIdentityKey]; taken {
		return encrypt.Identities{}, notReady(v1alpha1.ReasonMalformedKey,
			"Secret %s/%s: data key %q holds no age identity; remove it or put an identity there", s.Namespace, s.Name, GeneratedIdentityKey), nil
	}
	s.Data[GeneratedIdentityKey] = []byte("# generated by gitops-reverser for GitTarget " + t.Name + "\n# public key: " + public + "\n" + private + "\n")
	metav1.SetMetaDataAnnotation(&s.ObjectMeta, AnnotationAgePublicKey, public)
	metav1.SetMetaDataLabel(&s.ObjectMeta, batch.KeyMaterialLabel, "age-identity")
	metav1.SetMetaDataAnnotation(&s.ObjectMeta, AnnotationBackup, backupWarning)
	if create {
		err = redact.SecretValues(r.Client.Create(ctx, s), s.Data)
	} else {
		err = redact.SecretValues(r.Client.Update(ctx, s), s.Data)
	}
	if v, ok := unwritable("the generated age identity", client.ObjectKeyFromObject(s), err); ok {
		return encrypt.Identities{}, v, nil
	}
	if err != nil {
		// The API error names the object, never the data.
		return encrypt.Identities{}, encryptionVerdict{}, fmt.Errorf("storing the generated age identity in Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("generated age identity; back up its Secret", "gitTarget", client.ObjectKeyFromObject(t).String(),
		"secret", s.Name, "publicKey", public)
	r.event(t, ReasonAgeIdentityGenerated, "generated age identity %s in Secret %s: %s", public, s.Name, backupWarning)
	ids, err := encrypt.ParseIdentities(s.Data)
	if err != nil {
		return encrypt.Identities{}, encryptionVerdict{}, fmt.Errorf("reading back the generated identity: %w", err)
	}
	return ids, encryptionVerdict{}, nil
}

// event emits a Warning Event on the target when a recorder is configured.
func (r *GitTargetReconciler) event(t *v1alpha1.GitTarget, reason, format string, args ...any) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, reason, "Encrypt", format, args...)
}

// digestKey reads, or creates, the target's digest key Secret: `<target>-sops-digest` in
// the target's namespace, owned by the GitTarget so it goes with it. It is used only when
// the operator holds no identity; see the encrypt package for why the key must stay out of
// Git.
func (r *GitTargetReconciler) digestKey(ctx context.Context, t *v1alpha1.GitTarget) (encrypt.DigestKey, encryptionVerdict, error) {
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name + DigestSecretSuffix}
	var s corev1.Secret
	err := r.Client.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		return r.createDigestKey(ctx, t, key)
	}
	if err != nil {
		return nil, encryptionVerdict{}, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	k, err := encrypt.ParseDigestKey(s.Data[DigestKeyField])
	if err != nil {
		return nil, notReady(v1alpha1.ReasonMalformedKey,
			"Secret %s: %v; delete the Secret and the operator creates a new key (each encrypted file is rewritten once)", key, err), nil
	}
	if err := r.adoptDigestKey(ctx, t, &s); err != nil {
		if _, refused := unwritable("the digest key's owner", key, err); !refused {
			return nil, encryptionVerdict{}, err
		}
		// Refused for good (a policy, an immutable Secret): the key is used as it is. Once
		// the garbage collector deletes it with its former owner, a new one is made.
	}
	return k, encryptionVerdict{}, nil
}

// adoptDigestKey makes t the owner of a digest key Secret an earlier GitTarget of the same
// name left behind (deleted and created again before the garbage collector removed the
// Secret): the key stays, so the folder's encrypted files are not all rewritten once the
// collector would have deleted it. A Secret some other controller owns is left alone.
func (r *GitTargetReconciler) adoptDigestKey(ctx context.Context, t *v1alpha1.GitTarget, s *corev1.Secret) error {
	owner := metav1.GetControllerOf(s)
	if owner == nil || owner.UID == t.UID || owner.Kind != "GitTarget" || owner.Name != t.Name ||
		owner.APIVersion != v1alpha1.GroupVersion.String() {
		return nil
	}
	s.OwnerReferences = slices.DeleteFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.UID })
	if err := controllerutil.SetControllerReference(t, s, r.Client.Scheme()); err != nil {
		return fmt.Errorf("owning Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	if err := redact.SecretValues(r.Client.Update(ctx, s), s.Data); err != nil {
		return fmt.Errorf("adopting Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// createDigestKey generates a digest key and stores it in a new Secret owned by t.
func (r *GitTargetReconciler) createDigestKey(ctx context.Context, t *v1alpha1.GitTarget, key types.NamespacedName) (encrypt.DigestKey, encryptionVerdict, error) {
	k, err := encrypt.GenerateDigestKey()
	if err != nil {
		return nil, encryptionVerdict{}, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "gitops-reverser", batch.KeyMaterialLabel: "digest-key"}},
		Data: map[string][]byte{DigestKeyField: k},
	}
	if err := controllerutil.SetControllerReference(t, s, r.Client.Scheme()); err != nil {
		return nil, encryptionVerdict{}, fmt.Errorf("owning Secret %s: %w", key, err)
	}
	err = redact.SecretValues(r.Client.Create(ctx, s), s.Data)
	if v, ok := unwritable("the digest key", key, err); ok {
		return nil, v, nil
	}
	if err != nil {
		return nil, encryptionVerdict{}, fmt.Errorf("creating Secret %s: %w", key, err)
	}
	return k, encryptionVerdict{}, nil
}

// unwritable is the verdict on a key Secret the API server refuses to store for good (an
// invalid name, an immutable Secret, a quota, a policy): retrying cannot help until someone
// changes that, so the target goes on without encryption, writing everything else, and says
// why, instead of failing its reconcile, unregistered and with no condition, at every retry.
// It is looked at again at every poll and whenever a Secret of the target changes. The API
// error names the object, never the data.
func unwritable(what string, key types.NamespacedName, err error) (encryptionVerdict, bool) {
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		return encryptionVerdict{}, false
	}
	return notReady(v1alpha1.ReasonSecretUnwritable, "%s cannot be stored in Secret %s: %v", what, key, err), true
}
