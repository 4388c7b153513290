package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

// encryptedTarget makes a provider on a fresh remote and a target with the given age spec.
func encryptedTarget(t *testing.T, age *v1alpha1.AgeEncryption) (string, *v1alpha1.GitTarget) {
	t.Helper()
	ns := namespace(t)
	require.NoError(t, k8s.Create(context.Background(), provider(ns, "file://"+bareRemote(t))))
	gt := target(ns, "main", "live")
	if age != nil {
		gt.Spec.Encryption = &v1alpha1.Encryption{Age: age}
	}
	require.NoError(t, k8s.Create(context.Background(), gt))
	return ns, gt
}

// encryptionCondition waits for EncryptionReady with the status and returns the condition.
func encryptionCondition(t *testing.T, gt *v1alpha1.GitTarget, status metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionEncryptionReady, status)
	return *apimeta.FindStatusCondition(gt.Status.Conditions, v1alpha1.ConditionEncryptionReady)
}

func publicKey(t *testing.T) string {
	t.Helper()
	_, pub, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	return pub
}

func TestEncryptionReady(t *testing.T) {
	ctx := context.Background()
	t.Run("is False naming spec.encryption.age when the target has no encryption", func(t *testing.T) {
		_, gt := encryptedTarget(t, nil)
		c := encryptionCondition(t, gt, metav1.ConditionFalse)
		assert.Equal(t, v1alpha1.ReasonEncryptionNotConfigured, c.Reason)
		assert.Contains(t, c.Message, "spec.encryption.age")
		waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
	})
	t.Run("is True with recipients only and keeps a digest key in a Secret owned by the target", func(t *testing.T) {
		pub := publicKey(t)
		ns, gt := encryptedTarget(t, &v1alpha1.AgeEncryption{Recipients: []string{pub}})
		c := encryptionCondition(t, gt, metav1.ConditionTrue)
		assert.Contains(t, c.Message, pub)
		var s corev1.Secret
		require.NoError(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "live" + controller.DigestSecretSuffix}, &s))
		assert.Len(t, s.Data[controller.DigestKeyField], encrypt.DigestKeySize)
		require.Len(t, s.OwnerReferences, 1)
		assert.Equal(t, "GitTarget", s.OwnerReferences[0].Kind)
	})
	t.Run("keeps the digest key of a target deleted and created again before the garbage collector ran", func(t *testing.T) {
		// envtest runs no garbage collector: the old target's Secret stays, as it would for a while.
		age := &v1alpha1.AgeEncryption{Recipients: []string{publicKey(t)}}
		ns, gt := encryptedTarget(t, age)
		encryptionCondition(t, gt, metav1.ConditionTrue)
		secretKey := types.NamespacedName{Namespace: ns, Name: "live" + controller.DigestSecretSuffix}
		var before corev1.Secret
		require.NoError(t, k8s.Get(ctx, secretKey, &before))
		require.NoError(t, k8s.Delete(ctx, gt))
		eventually(t, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(gt), &v1alpha1.GitTarget{}))
		})

		again := target(ns, "main", "live")
		again.Spec.Encryption = &v1alpha1.Encryption{Age: age}
		require.NoError(t, k8s.Create(ctx, again))
		encryptionCondition(t, again, metav1.ConditionTrue)
		var after corev1.Secret
		eventually(t, func() bool {
			require.NoError(t, k8s.Get(ctx, secretKey, &after))
			owner := metav1.GetControllerOf(&after)
			return owner != nil && owner.UID == again.UID
		})
		assert.Len(t, after.OwnerReferences, 1, "the gone target no longer owns it")
		assert.Equal(t, before.Data, after.Data, "the same key: no encrypted file is rewritten")
	})
	t.Run("is False naming the index of a malformed recipient", func(t *testing.T) {
		_, gt := encryptedTarget(t, &v1alpha1.AgeEncryption{Recipients: []string{publicKey(t), "age1notakey"}})
		c := encryptionCondition(t, gt, metav1.ConditionFalse)
		assert.Equal(t, v1alpha1.ReasonMalformedKey, c.Reason)
		assert.Contains(t, c.Message, "recipient 1")
		assert.NotContains(t, c.Message, "age1notakey")
	})
	t.Run("is False naming the Secret when it is missing, and True once it holds an identity", func(t *testing.T) {
		ns, gt := encryptedTarget(t, &v1alpha1.AgeEncryption{SecretRef: &v1alpha1.LocalObjectReference{Name: "age"}})
		c := encryptionCondition(t, gt, metav1.ConditionFalse)
		assert.Equal(t, v1alpha1.ReasonSecretNotFound, c.Reason)
		assert.Contains(t, c.Message, ns+"/age")

		bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "age"},
			Data: map[string][]byte{"key.agekey": []byte("AGE-SECRET-KEY-1NOTREALLYAKEY\n")}}
		require.NoError(t, k8s.Create(ctx, bad))
		eventually(t, func() bool {
			c = encryptionCondition(t, gt, metav1.ConditionFalse)
			return c.Reason == v1alpha1.ReasonMalformedKey
		})
		assert.Contains(t, c.Message, `"key.agekey" line 1`)
		assert.NotContains(t, c.Message, "NOTREALLY")

		private, pub, err := encrypt.GenerateIdentity()
		require.NoError(t, err)
		bad.Data = map[string][]byte{"key.agekey": []byte(private + "\n")}
		require.NoError(t, k8s.Update(ctx, bad))
		c = encryptionCondition(t, gt, metav1.ConditionTrue)
		assert.Contains(t, c.Message, pub, "the identity's public key is a recipient")
		assert.NotContains(t, c.Message, private)
		var s corev1.Secret
		err = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "live" + controller.DigestSecretSuffix}, &s)
		assert.Error(t, err, "no digest key is needed while the operator holds an identity")
	})
	t.Run("is False naming the Secret when the API server refuses the identity it generates, and the target still writes", func(t *testing.T) {
		_, gt := encryptedTarget(t, &v1alpha1.AgeEncryption{SecretRef: &v1alpha1.LocalObjectReference{Name: "Age_Keys"}, GenerateWhenMissing: true})
		c := encryptionCondition(t, gt, metav1.ConditionFalse)
		assert.Equal(t, v1alpha1.ReasonSecretUnwritable, c.Reason)
		assert.Contains(t, c.Message, "Age_Keys")
		waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
	})
	t.Run("never quotes the generated identity when a policy that echoes the Secret refuses it", func(t *testing.T) {
		ns := namespace(t)
		refuseEchoingSecrets(t, ns)
		require.NoError(t, k8s.Create(ctx, provider(ns, "file://"+bareRemote(t))))
		gt := target(ns, "main", "live")
		gt.Spec.Encryption = &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{
			SecretRef: &v1alpha1.LocalObjectReference{Name: "age"}, GenerateWhenMissing: true}}
		require.NoError(t, k8s.Create(ctx, gt))
		c := encryptionCondition(t, gt, metav1.ConditionFalse)
		assert.Equal(t, v1alpha1.ReasonSecretUnwritable, c.Reason)
		assert.Contains(t, c.Message, "secrets here may not hold")
		assert.Contains(t, c.Message, "[value hidden]")
		assert.NotContains(t, c.Message, "AGE-SECRET-KEY-")
	})
	t.Run("generateWhenMissing creates an identity, annotates the Secret and warns without the private key", func(t *testing.T) {
		ns, gt := encryptedTarget(t, &v1alpha1.AgeEncryption{SecretRef: &v1alpha1.LocalObjectReference{Name: "age"}, GenerateWhenMissing: true})
		c := encryptionCondition(t, gt, metav1.ConditionTrue)
		var s corev1.Secret
		require.NoError(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "age"}, &s))
		pub := s.Annotations[controller.AnnotationAgePublicKey]
		require.True(t, strings.HasPrefix(pub, "age1"), "public key annotation: %q", pub)
		assert.Contains(t, s.Annotations[controller.AnnotationBackup], "back it up")
		assert.Contains(t, s.Labels, batch.KeyMaterialLabel, "the writer never writes key material")
		assert.Contains(t, c.Message, pub)
		ids, err := encrypt.ParseIdentities(s.Data)
		require.NoError(t, err)
		assert.Equal(t, encrypt.Recipients{pub}, ids.Recipients())
		private := privateKeyLine(string(s.Data[controller.GeneratedIdentityKey]))
		require.NotEmpty(t, private)

		ev := waitEvent(t, ns, controller.ReasonAgeIdentityGenerated)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Contains(t, ev.Note, pub)
		assert.Contains(t, ev.Note, "back it up")
		assert.NotContains(t, ev.Note, private)
		assert.NotContains(t, ev.Note, "AGE-SECRET-KEY")
		assert.NotContains(t, c.Message, "AGE-SECRET-KEY")

		// A second reconcile keeps the identity: nothing is generated twice.
		time.Sleep(2 * time.Second)
		require.NoError(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "age"}, &s))
		assert.Equal(t, pub, s.Annotations[controller.AnnotationAgePublicKey])
		assert.Len(t, s.Data, 1)
	})
}

// privateKeyLine returns the age private key line of an identity file.
func privateKeyLine(file string) string {
	for _, line := range strings.Split(file, "\n") {
		if strings.HasPrefix(line, "AGE-SECRET-KEY-") {
			return line
		}
	}
	return ""
}

// waitEvent waits for an events.k8s.io Event with the reason in ns.
func waitEvent(t *testing.T, ns, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, func() bool {
		var list eventsv1.EventList
		require.NoError(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Reason == reason {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// eventually polls cond for up to 30 seconds.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not reached in 30s")
}

// refuseEchoingSecrets installs, for the test's life, a ValidatingAdmissionPolicy that
// refuses every Secret written in ns with a message quoting its identity: a policy written
// carelessly, whose message the operator must not pass on.
func refuseEchoingSecrets(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	name := "echo-" + ns
	deny := admissionregistrationv1.Deny
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false",
				MessageExpression: "'secrets here may not hold ' + (has(object.data) && '" + controller.GeneratedIdentityKey +
					"' in object.data ? string(object.data['" + controller.GeneratedIdentityKey + "']) : 'anything')"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	require.NoError(t, k8s.Create(ctx, policy))
	require.NoError(t, k8s.Create(ctx, binding))
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, policy)
	})
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	eventually(t, func() bool { // the API server loads a policy within moments
		return apierrors.IsForbidden(k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)) ||
			apierrors.IsInvalid(k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll))
	})
}

func TestEncryptionValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	private, _, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	cases := []struct {
		name string
		age  v1alpha1.AgeEncryption
		want string
	}{
		{"rejects age without recipients or secretRef", v1alpha1.AgeEncryption{}, "age needs recipients or secretRef"},
		{"rejects generateWhenMissing without secretRef", v1alpha1.AgeEncryption{Recipients: []string{publicKey(t)}, GenerateWhenMissing: true}, "generateWhenMissing needs secretRef"},
		{"rejects a private key among recipients without echoing it", v1alpha1.AgeEncryption{Recipients: []string{private}}, "never private keys"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gt := target(ns, "main", "live")
			gt.Name = "enc-" + string(rune('a'+i))
			gt.Spec.Encryption = &v1alpha1.Encryption{Age: &tc.age}
			err := k8s.Create(ctx, gt)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "AGE-SECRET-KEY")
		})
	}
}

func TestATargetBeingDeletedStopsWritingAndMakesNoKeySecretAgain(t *testing.T) {
	ctx := context.Background()
	ns, gt := encryptedTarget(t, &v1alpha1.AgeEncryption{Recipients: []string{publicKey(t)}})
	encryptionCondition(t, gt, metav1.ConditionTrue)
	eventually(t, func() bool { _, ok := writer.Status(client.ObjectKeyFromObject(gt)); return ok })
	secretKey := types.NamespacedName{Namespace: ns, Name: "live" + controller.DigestSecretSuffix}

	// A foreground deletion keeps the target until the garbage collector has deleted the
	// Secret it owns; envtest runs no garbage collector, so the test deletes the Secret.
	require.NoError(t, k8s.Delete(ctx, gt, client.PropagationPolicy(metav1.DeletePropagationForeground)))
	releaseWhenDone(t, gt)
	eventually(t, func() bool { _, ok := writer.Status(client.ObjectKeyFromObject(gt)); return !ok })
	msg := waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReconciling, metav1.ConditionTrue)
	assert.Contains(t, msg, "being deleted, kept by finalizers [foregroundDeletion]")
	assert.Equal(t, v1alpha1.ReasonDeleting, apimeta.FindStatusCondition(gt.Status.Conditions, v1alpha1.ConditionReady).Reason, "not Ready")
	var s corev1.Secret
	require.NoError(t, k8s.Get(ctx, secretKey, &s))
	require.NoError(t, k8s.Delete(ctx, &s))
	// The Secret's deletion reaches the reconciler through its owner watch; a reconcile that
	// made the key again did so at once (the suite polls every second).
	time.Sleep(3 * time.Second)
	assert.True(t, apierrors.IsNotFound(k8s.Get(ctx, secretKey, &corev1.Secret{})), "no new digest key for a target being deleted")

}
