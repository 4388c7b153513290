package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getsops/sops/v3/decrypt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

// encryptedTarget applies a namespace, GitProvider and a GitTarget whose age block is
// given as YAML (indented under `age:`), and waits for Ready.
func encryptedTarget(t *testing.T, ns, remote, age string) {
	t.Helper()
	kubectl(t, targetManifest(ns, remoteURL(t, remote), "live", "0s", "  encryption:\n    age:\n"+age), "apply", "-f", "-")
	kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "gitprovider/repo", "gittarget/live")
}

// randomValue is a secret value that cannot appear anywhere by chance.
func randomValue(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "v-" + hex.EncodeToString(b)
}

// applySecret applies a Secret with stringData, retrying while admission still sees the
// target as unable to encrypt (the view follows the status within moments). Like tools that
// keep a copy of what they applied, it also copies the values into an annotation, which the
// scans for leaked values then cover too.
func applySecret(t *testing.T, ns, name string, values map[string]string) {
	t.Helper()
	var b, copied strings.Builder
	for _, k := range slices.Sorted(maps.Keys(values)) {
		fmt.Fprintf(&copied, "%s=%s;", k, values[k])
	}
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n", name, ns)
	fmt.Fprintf(&b, "  annotations:\n    example.com/original: %q\nstringData:\n", copied.String())
	for k, v := range values {
		fmt.Fprintf(&b, "  %s: %s\n", k, v)
	}
	eventually(t, 30*time.Second, "Secret "+name+" admitted", func() (bool, string) {
		out, err := kubectlErr(b.String(), "apply", "-f", "-")
		return err == nil, out
	})
}

// sopsDecrypt opens a committed file the way `sops -d` does, with the sops library's own
// decrypt path and an age identity from SOPS_AGE_KEY, and returns its data map.
func sopsDecrypt(t *testing.T, identity, content string) (map[string]string, error) {
	t.Helper()
	t.Setenv("SOPS_AGE_KEY", identity)
	t.Setenv("SOPS_AGE_KEY_FILE", "/nonexistent")
	plain, err := decrypt.Data([]byte(content), "yaml")
	if err != nil {
		return nil, err
	}
	var obj struct {
		Data map[string]string `json:"data"`
	}
	require.NoError(t, sigsyaml.Unmarshal(plain, &obj))
	return obj.Data, nil
}

// clusterData returns a Secret's data as the API server stores it (base64 values).
func clusterData(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	var obj struct {
		Data map[string]string `json:"data"`
	}
	require.NoError(t, sigsyaml.Unmarshal([]byte(kubectl(t, "", "-n", ns, "get", "secret", name, "-o", "json")), &obj))
	return obj.Data
}

// waitDecrypted waits until the file on main decrypts to the cluster's data.
func waitDecrypted(t *testing.T, remote, path, identity, ns, name string) string {
	t.Helper()
	want := clusterData(t, ns, name)
	var content string
	eventually(t, 30*time.Second, path+" equal to the cluster", func() (bool, string) {
		c, ok := fileAt(remote, path)
		if !ok {
			return false, "missing"
		}
		content = c
		got, err := sopsDecrypt(t, identity, c)
		if err != nil {
			return false, err.Error()
		}
		return assert.ObjectsAreEqual(want, got), fmt.Sprintf("keys %d vs %d", len(got), len(want))
	})
	return content
}

// generatedIdentity reads the identity the operator generated into the Secret.
func generatedIdentity(t *testing.T, ns, secret string) string {
	t.Helper()
	b64 := kubectl(t, "", "-n", ns, "get", "secret", secret, "-o", `jsonpath={.data.identity\.agekey}`)
	raw, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	return string(raw)
}

// allObjects dumps every object of the remote (every blob of every commit, trees and
// commits included) for a history scan.
func allObjects(t *testing.T, remote string) string {
	t.Helper()
	return git(t, remote, "cat-file", "--batch-all-objects", "--batch")
}

// changedFields lists the YAML keys on the removed lines of the newest change to path.
func changedFields(t *testing.T, remote, path string) []string {
	t.Helper()
	shas := strings.Fields(git(t, remote, "log", "-n", "2", "--format=%H", "main", "--", path))
	require.Len(t, shas, 2)
	diff := git(t, remote, "diff", "--unified=0", shas[1], shas[0], "--", path)
	var out []string
	for _, line := range strings.Split(diff, "\n") {
		if strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---") {
			out = append(out, strings.Fields(strings.TrimPrefix(line, "-"))[0])
		}
	}
	return out
}

func TestSecretsReachGitOnlyEncryptedAndNeverInPlaintext(t *testing.T) {
	remote := newRemote(t)
	work := t.TempDir()
	var logs []string
	op := startOperator(t, work)
	const ns = "enc-a"
	encryptedTarget(t, ns, remote, "      secretRef:\n        name: age-keys\n      generateWhenMissing: true\n")
	kubectl(t, "", "-n", ns, "wait", "--for=condition=EncryptionReady", "--timeout=60s", "gittarget/live")
	watchRule(t, ns, "all", `"configmaps", "secrets"`)
	identity := generatedIdentity(t, ns, "age-keys")
	require.Contains(t, identity, "AGE-SECRET-KEY-")
	waitFile(t, remote, "live/.sops.yaml", func(c string) bool { return strings.Contains(c, "age1") })

	// Round trip: create, update one key, delete.
	values := []string{randomValue(t), randomValue(t), randomValue(t), randomValue(t)}
	dry := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: %s\nstringData:\n  password: %s\n", ns, values[0])
	eventually(t, 30*time.Second, "dry-run warning with the encrypted path", func() (bool, string) {
		o, err := kubectlErr(dry, "apply", "--dry-run=server", "-f", "-")
		return err == nil && strings.Contains(o, "main:live/enc-a/secrets/db.sops.yaml"), o
	})
	applySecret(t, ns, "db", map[string]string{"password": values[0], "user": values[1]})
	applySecret(t, ns, "api", map[string]string{"token": values[2]})
	waitDecrypted(t, remote, "live/enc-a/secrets/db.sops.yaml", identity, ns, "db")
	waitDecrypted(t, remote, "live/enc-a/secrets/api.sops.yaml", identity, ns, "api")

	applySecret(t, ns, "db", map[string]string{"password": values[3], "user": values[1]})
	waitDecrypted(t, remote, "live/enc-a/secrets/db.sops.yaml", identity, ns, "db")
	fields := changedFields(t, remote, "live/enc-a/secrets/db.sops.yaml")
	assert.Contains(t, fields, "password:")
	assert.Subset(t, []string{"password:", "example.com/original:", "lastmodified:", "mac:"}, fields,
		"only the changed key's line, the annotation copying it and sops metadata change")

	kubectl(t, "", "-n", ns, "delete", "secret", "api")
	eventually(t, 30*time.Second, "api.sops.yaml removed", func() (bool, string) {
		_, ok := fileAt(remote, "live/enc-a/secrets/api.sops.yaml")
		return !ok, "still there"
	})

	// Restarts with unchanged Secrets make no commit.
	before := commits(t, remote)
	const restarts = 10
	for i := 0; i < restarts; i++ {
		op.stop()
		logs = append(logs, op.logs.String())
		op = startOperator(t, work)
		kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "gittarget/live")
		time.Sleep(3 * time.Second) // past a poll interval: snapshot and resync have run
	}
	assert.Equal(t, before, commits(t, remote), "restarts with unchanged Secrets must not commit")
	_, ok := fileAt(remote, "live/enc-a/secrets/age-keys.sops.yaml")
	assert.False(t, ok, "the Secret holding the identity is never written, not even encrypted")

	// Recipient rotation: add a new recipient; existing files are re-wrapped in one commit.
	newPrivate, newPublic, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	kubectl(t, "", "-n", ns, "patch", "gittarget", "live", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"encryption":{"age":{"recipients":[%q]}}}}`, newPublic))
	eventually(t, 30*time.Second, "re-wrap commit", func() (bool, string) {
		c := commits(t, remote)
		return strings.HasPrefix(c[0], "Re-wrap ") && strings.Contains(c[0], "encrypted file(s) in live"), c[0]
	})
	assert.Len(t, commits(t, remote), len(before)+1, "one commit re-wraps everything")
	db, _ := fileAt(remote, "live/enc-a/secrets/db.sops.yaml")
	got, err := sopsDecrypt(t, newPrivate, db)
	require.NoError(t, err, "the new identity decrypts re-wrapped files")
	assert.Equal(t, clusterData(t, ns, "db"), got)
	cfg, _ := fileAt(remote, "live/.sops.yaml")
	assert.Contains(t, cfg, newPublic)

	// History, logs and Events: no plaintext value, no base64 of one, no private key.
	op.stop()
	logs = append(logs, op.logs.String())
	history := allObjects(t, remote)
	events := kubectl(t, "", "get", "events", "-A", "-o", "yaml")
	for _, where := range []struct{ name, text string }{{"git history", history}, {"operator logs", strings.Join(logs, "\n")}, {"events", events}} {
		for _, v := range values {
			assert.NotContains(t, where.text, v, "plaintext in %s", where.name)
			assert.NotContains(t, where.text, base64.StdEncoding.EncodeToString([]byte(v)), "base64 plaintext in %s", where.name)
		}
		assert.NotContains(t, where.text, "AGE-SECRET-KEY-", "a private key in %s", where.name)
	}
	assert.Contains(t, events, "AgeIdentityGenerated")
	fsck(t, remote)
}

func TestSecretIsDeniedAtDryRunWhenTheTargetHasNoRecipients(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	const ns = "enc-b"
	encryptedTarget(t, ns, remote, "      secretRef:\n        name: missing\n")
	kubectl(t, "", "-n", ns, "wait", "--for=condition=EncryptionReady=False", "--timeout=60s", "gittarget/live")
	watchRule(t, ns, "all", `"secrets"`)
	value := randomValue(t)
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: %s\nstringData:\n  password: %s\n", ns, value)
	out := waitDenied(t, manifest, "apply", "--dry-run=server", "-f", "-")
	assert.Contains(t, out, "Secret enc-b/db would be stored in plaintext")
	assert.Contains(t, out, "Secret enc-b/missing (spec.encryption.age.secretRef) not found")
	assert.Contains(t, out, "or set generateWhenMissing", "the denial quotes the condition, which says what to fix")
	assert.NotContains(t, out, value)
	_, err := kubectlErr("", "-n", ns, "get", "secret", "db")
	assert.Error(t, err, "a dry run stores nothing")
}

func TestRecipientsOnlyTargetKeepsItsDigestKeyOutOfGitAndMakesNoCommitOnRestart(t *testing.T) {
	remote := newRemote(t)
	work := t.TempDir()
	op := startOperator(t, work)
	const ns = "enc-c"
	private, public, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	encryptedTarget(t, ns, remote, fmt.Sprintf("      recipients: [%q]\n", public))
	kubectl(t, "", "-n", ns, "wait", "--for=condition=EncryptionReady", "--timeout=60s", "gittarget/live")
	watchRule(t, ns, "all", `"secrets"`)
	value := randomValue(t)
	applySecret(t, ns, "db", map[string]string{"password": value})
	file := waitDecrypted(t, remote, "live/enc-c/secrets/db.sops.yaml", private, ns, "db")
	assert.True(t, strings.HasPrefix(file, "# "+encrypt.DigestCommentKey+": v1:"), "recipients only: a keyed digest is kept with the file")
	kubectl(t, "", "-n", ns, "get", "secret", "live-sops-digest")

	before := commits(t, remote)
	for i := 0; i < 2; i++ {
		op.stop()
		op = startOperator(t, work)
		kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "gittarget/live")
		time.Sleep(3 * time.Second)
	}
	assert.Equal(t, before, commits(t, remote), "an unchanged Secret is not rewritten without an identity either")
	assert.NotContains(t, git(t, remote, "ls-tree", "-r", "--name-only", "main"), "live-sops-digest")
	history := allObjects(t, remote)
	assert.NotContains(t, history, value)
	assert.NotContains(t, history, base64.StdEncoding.EncodeToString([]byte(value)))
}
