package batch_test

import (
	"strings"
	"testing"

	"github.com/getsops/sops/v3"
	sopsaes "github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/common"
	sopsconfig "github.com/getsops/sops/v3/config"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"github.com/getsops/sops/v3/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

// encryptTogether writes docs as one sops file for recipients, as a person's
// `sops -e` of a multi-document manifest does.
func encryptTogether(t *testing.T, recipients encrypt.Recipients, docs ...string) string {
	t.Helper()
	store := sopsyaml.NewStore(&sopsconfig.YAMLStoreConfig{Indent: 2})
	branches, err := store.LoadPlainFile([]byte(strings.Join(docs, "---\n")))
	require.NoError(t, err)
	var group sops.KeyGroup
	for _, r := range recipients {
		key, err := sopsage.MasterKeyFromRecipient(r)
		require.NoError(t, err)
		group = append(group, key)
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{KeyGroups: []sops.KeyGroup{group},
		EncryptedRegex: encrypt.EncryptedRegex, Version: version.Version}}
	dataKey, errs := tree.GenerateDataKey()
	require.Empty(t, errs)
	require.NoError(t, common.EncryptTree(common.EncryptTreeOpts{Tree: &tree, Cipher: sopsaes.NewCipher(), DataKey: dataKey}))
	out, err := store.EmitEncryptedFile(tree)
	require.NoError(t, err)
	return string(out)
}

// appObject is the manifest of a core object of kind in namespace app whose data holds
// key: value.
func appObject(kind, name, key, value string) string {
	return "apiVersion: v1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  namespace: app\ndata:\n  " + key + ": " + value + "\n"
}

func TestAnEncryptedFileHoldingSeveralObjectsIsNeitherRewrittenNorCutByTheWriter(t *testing.T) {
	ids, recipients := identity(t)
	s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
	secret := func(name, value string) string { return appObject("Secret", name, "password", value) }
	const file = "live/app/secrets/pair.sops.yaml"
	pair := encryptTogether(t, recipients, secret("a", "b2xk"), secret("b", "b2xk"))
	co := s.remote.Clone("main")
	co.WriteFile(file, pair)
	co.CommitAndPush("main", "a person encrypts two Secrets in one file")
	s.restart()

	st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "a", map[string]any{"password": "b2xk"}))
	assert.Empty(t, st.Refused, "an object as the file holds it needs nothing written: no refusal at every list")

	problem := s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "a").Problem
	assert.Contains(t, problem, file+" holds 2 objects, some or all of them encrypted", "admission denies the change, with the reason")
	st = s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "a", map[string]any{"password": "bmV3"}))
	require.Len(t, st.Refused, 1)
	assert.Equal(t, "Secret app/a: not written: "+problem, st.Refused[0], "admission and the writer give the same reason")
	assert.Equal(t, strings.TrimSuffix(pair, "\n"), s.remote.Show("main", file), "b is not dropped")

	removal := s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "b").RemovalProblem
	assert.Contains(t, removal, file+" holds 2 objects", "admission denies the deletion, with the reason")
	assert.True(t, s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "c").Absent, "a Secret the folder does not hold")
	assert.False(t, s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "b").Absent)
	st = s.deleteAndSettle(batch.ObjectKey{GVR: secretsGVR, Kind: "Secret", Namespace: "app", Name: "b"})
	assert.Contains(t, strings.Join(st.Refused, "\n"), "Secret app/b: not removed: "+removal, "admission and the writer give the same reason")
	assert.Equal(t, strings.TrimSuffix(pair, "\n"), s.remote.Show("main", file), "nor cut out, which would break the MAC")
	plain, err := encrypt.Decrypt([]byte(s.remote.Show("main", file)+"\n"), ids)
	require.NoError(t, err)
	assert.Contains(t, string(plain), "name: b")
}

func TestARecipientChangeNeverReWrapsAFileOfSeveralObjectsHoldingKeyMaterial(t *testing.T) {
	ids, recipients := identity(t)
	s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
	s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})) // .sops.yaml
	private, _, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	flux := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sops-age\n  namespace: app\nstringData:\n  age.agekey: " + private + "\n"
	other := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: other\n  namespace: app\ndata:\n  k: b2xk\n"
	const file = "live/app/secrets/together.sops.yaml"
	pair := encryptTogether(t, recipients, other, flux)
	co := s.remote.Clone("main")
	co.WriteFile(file, pair)
	co.CommitAndPush("main", "a person encrypts Flux's key beside another Secret")
	s.restart()

	newIDs, newRecipients := identity(t)
	s.spec.Encryption = &batch.Encryption{Recipients: append(append(encrypt.Recipients{}, recipients...), newRecipients...), Identities: ids}
	s.ensure()
	msg := s.remote.Log("main")[0]
	require.Contains(t, msg, "Re-wrap")
	assert.Equal(t, strings.TrimSuffix(pair, "\n"), s.remote.Show("main", file), "left as it is")
	_, err = encrypt.Decrypt([]byte(s.remote.Show("main", file)+"\n"), newIDs)
	assert.Error(t, err, "the new recipients never get the key")
}

// Flux decrypts each document of a file on its own, so a person may keep an encrypted
// document after a plaintext one: the file is no sops file by its first document, which is
// all sops reads.
func TestADocumentEncryptedAfterAPlaintextOneIsNeverWrittenBackInPlaintext(t *testing.T) {
	ids, recipients := identity(t)
	s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
	configMap := func(name, value string) string { return appObject("ConfigMap", name, "pw", value) }
	const file = "live/app/configmaps/mixed.yaml"
	mixed := configMap("plain", "open") + "---\n" + encryptTogether(t, recipients, configMap("db", "hunter2"))
	co := s.remote.Clone("main")
	co.WriteFile(file, mixed)
	co.CommitAndPush("main", "a person encrypts one ConfigMap of the file")
	s.restart()

	problem := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "db").Problem
	assert.Contains(t, problem, file+" holds 2 objects, some or all of them encrypted", "admission denies the change, with the reason")
	st := s.submitAndSettle(s.cluster.put(cmGVR, "ConfigMap", "db", map[string]any{"pw": "hunter3"}))
	require.Len(t, st.Refused, 1)
	assert.Equal(t, "ConfigMap app/db: not written: "+problem, st.Refused[0])
	st = s.submitAndSettle(s.cluster.put(cmGVR, "ConfigMap", "plain", map[string]any{"pw": "changed"}))
	assert.Contains(t, st.Refused, "ConfigMap app/plain: not written: "+problem, "nor is the plaintext one rewritten, which would rewrite the file")
	got := s.remote.Show("main", file)
	assert.NotContains(t, got, "hunter", "the encrypted document stays encrypted")
	assert.Equal(t, strings.TrimSuffix(mixed, "\n"), got)
}
