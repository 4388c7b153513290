package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

// devEncryption turns encryption on for the demo target (an age identity the operator
// generates) and shows the Secret refused a moment ago landing as a SOPS file.
func devEncryption(ctx context.Context, c client.Client, remote string) error {
	step("kubectl -n demo patch gittarget live: spec.encryption.age {secretRef: sops-age, generateWhenMissing: true}")
	var t v1alpha1.GitTarget
	key := types.NamespacedName{Namespace: "demo", Name: "live"}
	if err := c.Get(ctx, key, &t); err != nil {
		return err
	}
	t.Spec.Encryption = &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{
		SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-age"}, GenerateWhenMissing: true}}
	if err := c.Update(ctx, &t); err != nil {
		return err
	}
	if err := waitEncryptionReady(ctx, c, key); err != nil {
		return err
	}
	step("kubectl -n demo create secret generic db --from-literal=password=...")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db"}, StringData: map[string]string{"password": demoPassword}}
	var err error
	for i := 0; i < 50 && ctx.Err() == nil; i++ { // every replica's webhook view sees EncryptionReady within moments
		if err = c.Create(ctx, secret.DeepCopy()); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("creating Secret demo/db with encryption configured: %w", err)
	}
	const file = "live/demo/secrets/db.sops.yaml"
	content, err := waitForFile(ctx, remote, file)
	if err != nil {
		return err
	}
	step(file + " (decrypt with `sops -d` and the identity in Secret demo/sops-age)")
	fmt.Print(content)
	return checkEncrypted(content, demoPassword)
}

// demoPassword is the value of the demo's Secret.
const demoPassword = "s3cret"

// checkEncrypted fails the demo when the Secret file holds value in plaintext, as written
// or as the API server stores it (base64 under data), or is not a SOPS file whose data is
// encrypted.
func checkEncrypted(content, value string) error {
	if strings.Contains(content, value) || strings.Contains(content, base64.StdEncoding.EncodeToString([]byte(value))) {
		return errors.New("the Secret's value reached Git in plaintext")
	}
	if !strings.Contains(content, "\nsops:\n") || !strings.Contains(content, "password: ENC[") {
		return errors.New("the Secret's file is not a SOPS file with its data encrypted")
	}
	return nil
}

// waitEncryptionReady waits until the target's EncryptionReady condition is True for its
// current generation.
func waitEncryptionReady(ctx context.Context, c client.Client, key types.NamespacedName) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var t v1alpha1.GitTarget
		if err := c.Get(ctx, key, &t); err != nil {
			return err
		}
		if cond := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionEncryptionReady); cond != nil &&
			cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == t.Generation {
			fmt.Printf("    GitTarget %s: EncryptionReady (%s)\n", key, cond.Message)
			return nil
		}
	}
	return fmt.Errorf("GitTarget %s did not report EncryptionReady within 60s", key)
}

// waitForFile waits until file exists on the remote's main branch and returns it.
func waitForFile(ctx context.Context, remote, file string) (string, error) {
	r, err := git.PlainOpen(remote)
	if err != nil {
		return "", err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		ref, err := r.Reference(plumbing.NewBranchReferenceName("main"), true)
		if err != nil {
			continue
		}
		head, err := r.CommitObject(ref.Hash())
		if err != nil {
			continue
		}
		if f, err := head.File(file); err == nil {
			return f.Contents()
		}
	}
	if ctx.Err() != nil {
		return "", ctx.Err() // stopped, or the operator did (its error says why)
	}
	return "", fmt.Errorf("%s did not appear on main in %s within 60s", file, remote)
}
