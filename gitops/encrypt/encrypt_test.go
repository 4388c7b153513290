package encrypt_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/getsops/sops/v3/decrypt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

func TestEncryptThenDecryptGivesTheInputBack(t *testing.T) {
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")

	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)
	got, err := encrypt.Decrypt(enc, k.ids)
	require.NoError(t, err)

	assert.Equal(t, string(plain), string(got))
}

func TestEncryptedFileKeepsObjectIdentityReadable(t *testing.T) {
	k := newKeyPair(t)
	enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients)
	require.NoError(t, err)

	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(enc, &doc))
	assert.Equal(t, "v1", doc["apiVersion"])
	assert.Equal(t, "Secret", doc["kind"])
	assert.Equal(t, "Opaque", doc["type"])
	metadata, ok := doc["metadata"].(map[string]any)
	require.True(t, ok, "metadata")
	assert.Equal(t, "db-credentials", metadata["name"])
	assert.Equal(t, "team-a", metadata["namespace"])
	assert.Equal(t, map[string]any{"app": "api"}, metadata["labels"])
	sections := map[string]any{"data": doc["data"], "stringData": doc["stringData"], "annotations": metadata["annotations"]}
	for section, v := range sections {
		values, ok := v.(map[string]any)
		require.True(t, ok, section)
		for key, v := range values {
			assert.Regexp(t, `^ENC\[AES256_GCM,data:`, v, "%s.%s is ciphertext", section, key)
		}
	}
	sopsBlock, ok := doc["sops"].(map[string]any)
	require.True(t, ok, "a sops metadata block")
	assert.Equal(t, encrypt.EncryptedRegex, sopsBlock["encrypted_regex"])
	assert.True(t, encrypt.IsEncrypted(enc))
}

func TestEncryptedFileHoldsNoPlaintextValue(t *testing.T) {
	k := newKeyPair(t)
	enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients)
	require.NoError(t, err)
	assertNoSecrets(t, string(enc), k.private)
}

func TestEncryptedFileOpensWithSopsOwnDecryptPath(t *testing.T) {
	// decrypt.Data is the code path of `sops -d`: keys from SOPS_AGE_KEY,
	// MAC verified, YAML store emitting the plaintext.
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)

	t.Setenv("SOPS_AGE_KEY", k.private)
	t.Setenv("SOPS_AGE_KEY_FILE", "/nonexistent")
	got, err := decrypt.Data(enc, "yaml")
	require.NoError(t, err)

	var want, have any
	require.NoError(t, yaml.Unmarshal(plain, &want))
	require.NoError(t, yaml.Unmarshal(got, &have))
	assert.Equal(t, want, have)
}

func TestEncryptedFileShape(t *testing.T) {
	k := newKeyPair(t)
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	tests := []struct {
		name   string
		golden string
		opts   []encrypt.Option
	}{
		{name: "without a digest key the file is plain sops", golden: "secret.sops.golden.yaml"},
		{name: "with a digest key the digest comment comes first", golden: "secret-digest.sops.golden.yaml", opts: []encrypt.Option{encrypt.WithDigestKey(key)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients, tt.opts...)
			require.NoError(t, err)
			assertGolden(t, tt.golden, redactRandom(string(enc), k.recipients[0]))
		})
	}
}

// redactRandom replaces what differs between runs (ciphertext, wrapped
// keys, time, version, the generated recipient) so the file's shape can be
// compared with a golden file.
func redactRandom(s, recipient string) []byte {
	for _, r := range []struct{ re, with string }{
		{`ENC\[AES256_GCM,data:[^,]*,iv:[^,]*,tag:[^,]*,type:(\w+)\]`, `ENC[AES256_GCM,data:…,iv:…,tag:…,type:$1]`},
		{`(?s)-----BEGIN AGE ENCRYPTED FILE-----.*?-----END AGE ENCRYPTED FILE-----`, "<age-wrapped data key>"},
		{`lastmodified: "[^"]*"`, `lastmodified: "<time>"`},
		{`version: \S+`, `version: <sops version>`},
		{`digest: v1:\S+`, `digest: v1:<salt>:<hmac>`},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return []byte(strings.ReplaceAll(s, recipient, "age1<recipient>"))
}

func TestEncryptErrors(t *testing.T) {
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)
	tests := []struct {
		name    string
		doc     []byte
		r       encrypt.Recipients
		wantErr error
	}{
		{name: "no recipients is ErrNoRecipients", doc: plain, r: nil, wantErr: encrypt.ErrNoRecipients},
		{name: "a malformed recipient is ErrMalformedKey", doc: plain, r: encrypt.Recipients{"age1bogus"}, wantErr: encrypt.ErrMalformedKey},
		{name: "a private key as recipient is ErrMalformedKey", doc: plain, r: encrypt.Recipients{k.private}, wantErr: encrypt.ErrMalformedKey},
		{name: "an encrypted document is not encrypted twice", doc: enc, r: k.recipients, wantErr: encrypt.ErrAlreadyEncrypted},
		{name: "invalid YAML is ErrMalformedDocument", doc: []byte("data: [password: " + secretValues()[0]), r: k.recipients, wantErr: encrypt.ErrMalformedDocument},
		{name: "two documents are ErrMalformedDocument", doc: append(append([]byte{}, plain...), append([]byte("---\n"), plain...)...), r: k.recipients, wantErr: encrypt.ErrMalformedDocument},
		{name: "an empty document is ErrMalformedDocument", doc: nil, r: k.recipients, wantErr: encrypt.ErrMalformedDocument},
		{name: "a duplicate key is ErrMalformedDocument", doc: []byte("data:\n  password: " + forbidden()[1] + "\n  password: x\n"), r: k.recipients, wantErr: encrypt.ErrMalformedDocument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encrypt.Encrypt(tt.doc, tt.r)
			require.ErrorIs(t, err, tt.wantErr)
			assertNoSecrets(t, err.Error(), k.private)
		})
	}
}

func TestDecryptErrors(t *testing.T) {
	k, other := newKeyPair(t), newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)
	tampered := tamperValue(t, enc, "password")
	tests := []struct {
		name    string
		doc     []byte
		ids     encrypt.Identities
		wantErr error
	}{
		{name: "without identities it is ErrNoIdentity", doc: enc, wantErr: encrypt.ErrNoIdentity},
		{name: "with someone else's identity it is ErrIdentityMismatch", doc: enc, ids: other.ids, wantErr: encrypt.ErrIdentityMismatch},
		{name: "a swapped ciphertext fails the integrity check", doc: tampered, ids: k.ids, wantErr: encrypt.ErrIntegrity},
		{name: "a plaintext document is ErrNotEncrypted", doc: plain, ids: k.ids, wantErr: encrypt.ErrNotEncrypted},
		{name: "garbage is ErrMalformedDocument", doc: []byte("sops: [1"), ids: k.ids, wantErr: encrypt.ErrMalformedDocument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encrypt.Decrypt(tt.doc, tt.ids)
			require.ErrorIs(t, err, tt.wantErr)
			assertNoSecrets(t, err.Error(), k.private, other.private)
		})
	}
}

// tamperValue moves the ciphertext of key to another key's line: each part
// is valid sops syntax, but authenticated for another path.
func tamperValue(t *testing.T, enc []byte, key string) []byte {
	t.Helper()
	c := ciphertexts(enc)
	require.Contains(t, c, key)
	require.Contains(t, c, "token")
	return []byte(strings.Replace(string(enc), "token: "+c["token"], "token: "+c[key], 1))
}

func TestIsEncrypted(t *testing.T) {
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)
	tests := []struct {
		name string
		doc  []byte
		want bool
	}{
		{name: "a sops file is encrypted", doc: enc, want: true},
		{name: "a plaintext Secret is not", doc: plain},
		{name: "an empty file is not", doc: nil},
		{name: "invalid YAML is not", doc: []byte("a: [")},
		{name: "a sops key further down does not count", doc: []byte("data:\n  sops: x\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, encrypt.IsEncrypted(tt.doc))
		})
	}
}

// sops expands YAML aliases without a bound; a file in a folder is anybody's with push access.
func TestAnAliasThatContainsItselfOrExpandsTooFarIsRefusedBeforeSopsReadsIt(t *testing.T) {
	laughs := "lol: &a [x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		laughs += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 8) + "*" + prev + "]\n"
		prev = name
	}
	k := newKeyPair(t)
	r, ids := k.recipients, k.ids
	for name, doc := range map[string]string{
		"an alias that contains itself, in a later document": "kind: ConfigMap\nsops: {}\n---\nb: &x [*x]\n",
		"an alias that contains itself, in the first":        "sops: {}\nb: &x [*x]\n",
		"aliases that multiply at each level":                "sops: {}\n---\n" + laughs,
	} {
		t.Run(name, func(t *testing.T) {
			assert.False(t, encrypt.IsEncrypted([]byte(doc)))
			_, err := encrypt.Decrypt([]byte(doc), ids)
			assert.ErrorIs(t, err, encrypt.ErrMalformedDocument)
			out, _, err := encrypt.Update([]byte(doc), []byte("kind: ConfigMap\n"), r, &ids)
			require.NoError(t, err, "a file sops cannot read is written afresh from the cluster")
			assert.True(t, encrypt.IsEncrypted(out))
			_, err = encrypt.Encrypt([]byte(strings.Replace(doc, "sops: {}\n", "", 1)), r)
			assert.ErrorIs(t, err, encrypt.ErrMalformedDocument)
		})
	}
	t.Run("an alias that points elsewhere is read as before", func(t *testing.T) {
		doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: &v one\n  b: *v\n"
		enc, err := encrypt.Encrypt([]byte(doc), r)
		require.NoError(t, err)
		assert.True(t, encrypt.IsEncrypted(enc))
		plain, err := encrypt.Decrypt(enc, ids)
		require.NoError(t, err)
		assert.Contains(t, string(plain), "b: one")
	})
}

// FuzzIsEncrypted checks that the sops entry points a file in Git reaches, whatever its
// content, return: no crash, no unbounded alias expansion. The seed corpus is in
// testdata/fuzz/FuzzIsEncrypted (go test -fuzz FuzzIsEncrypted ./gitops/encrypt adds to it).
func FuzzIsEncrypted(f *testing.F) {
	k := newKeyPair(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		if encrypt.IsEncrypted(doc) {
			_, _ = encrypt.Decrypt(doc, k.ids)
		}
		_, _ = encrypt.NeedsUpdateKeys(doc, k.recipients)
	})
}
