package encrypt_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getsops/sops/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

// changedSecret is testdata/secret.yaml with only data.token changed.
func changedSecret(t *testing.T) []byte {
	t.Helper()
	plain := string(readTestdata(t, "secret.yaml"))
	changed := strings.Replace(plain, "Z2hwX1NlY3JldFRva2VuVmFsdWUxMjM0NTY3ODkw", "bmV3LXRva2VuLXZhbHVl", 1)
	require.NotEqual(t, plain, changed)
	return []byte(changed)
}

func TestUpdateWithIdentityKeepsUnchangedFilesByteForByte(t *testing.T) {
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)

	tests := []struct {
		name string
		doc  []byte
	}{
		{name: "the same bytes", doc: plain},
		{name: "the same content with other key order and quoting", doc: reordered(t, plain)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 3 { // resyncs and restarts
				out, changed, err := encrypt.Update(enc, tt.doc, k.recipients, &k.ids)
				require.NoError(t, err)
				assert.False(t, changed)
				assert.Equal(t, enc, out, "existing bytes returned untouched")
			}
		})
	}
}

// reordered rewrites the test Secret with data keys in another order and
// quoted values, the same content in another form.
func reordered(t *testing.T, plain []byte) []byte {
	t.Helper()
	s := string(plain)
	s = strings.Replace(s,
		"  password: Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==\n  token: Z2hwX1NlY3JldFRva2VuVmFsdWUxMjM0NTY3ODkw\n",
		"  token: \"Z2hwX1NlY3JldFRva2VuVmFsdWUxMjM0NTY3ODkw\"\n  password: 'Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ=='\n", 1)
	require.NotEqual(t, string(plain), s)
	return []byte(s)
}

func TestUpdateWithIdentityChangesOnlyTheChangedValue(t *testing.T) {
	k := newKeyPair(t)
	enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients, encrypt.WithKeyProof(k.ids))
	require.NoError(t, err)

	out, changed, err := encrypt.Update(enc, changedSecret(t), k.recipients, &k.ids)
	require.NoError(t, err)
	assert.True(t, changed)

	before, after := ciphertexts(enc), ciphertexts(out)
	require.Len(t, before, 6, "password, token, username, config.ini and two annotations")
	for key, line := range before {
		if key == "token" {
			assert.NotEqual(t, line, after[key], "the changed value has new ciphertext")
			continue
		}
		assert.Equal(t, line, after[key], "%s keeps its exact ciphertext", key)
	}
	assert.Equal(t, ageBlock.FindAllString(string(enc), -1), ageBlock.FindAllString(string(out), -1),
		"the data key is reused, its wrapping untouched")

	changedLines := diffLines(string(enc), string(out))
	assert.Subset(t, []string{"token", "lastmodified", "mac"}, changedLines,
		"only the value and the sops bookkeeping differ (lastmodified has one-second resolution)")
	assert.Contains(t, changedLines, "token")
	assert.Contains(t, changedLines, "mac")

	got, err := encrypt.Decrypt(out, k.ids)
	require.NoError(t, err)
	assert.Equal(t, string(changedSecret(t)), string(got))
}

// diffLines names the keys of the lines that differ between two files of
// the same line count.
func diffLines(a, b string) []string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al) != len(bl) {
		return []string{"<line count differs>"}
	}
	var out []string
	for i := range al {
		if al[i] != bl[i] {
			key, _, _ := strings.Cut(strings.TrimSpace(bl[i]), ":")
			out = append(out, key)
		}
	}
	return out
}

func TestUpdateWithoutExistingOrPlaintextFileEncryptsAfresh(t *testing.T) {
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	tests := []struct {
		name     string
		existing []byte
	}{
		{name: "no file yet", existing: nil},
		{name: "a plaintext file from before encryption was enabled", existing: plain},
		{name: "an unreadable file", existing: []byte("sops: [")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := encrypt.Update(tt.existing, plain, k.recipients, &k.ids)
			require.NoError(t, err)
			assert.True(t, changed)
			assertNoSecrets(t, string(out), k.private)
			got, err := encrypt.Decrypt(out, k.ids)
			require.NoError(t, err)
			assert.Equal(t, string(plain), string(got))
		})
	}
}

func TestUpdateRewritesATamperedFile(t *testing.T) {
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)

	out, changed, err := encrypt.Update(tamperValue(t, enc, "password"), plain, k.recipients, &k.ids)
	require.NoError(t, err)
	assert.True(t, changed, "the cluster's plaintext replaces the damaged file")
	got, err := encrypt.Decrypt(out, k.ids)
	require.NoError(t, err)
	assert.Equal(t, string(plain), string(got))
}

func TestUpdateForAnotherRecipientSetEncryptsUnderANewDataKey(t *testing.T) {
	k, added := newKeyPair(t), newKeyPair(t)
	enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients, encrypt.WithKeyProof(k.ids))
	require.NoError(t, err)
	both := sorted(k.recipients[0], added.recipients[0])

	out, changed, err := encrypt.Update(enc, changedSecret(t), both, &k.ids)
	require.NoError(t, err)
	assert.True(t, changed)
	old, err := encrypt.DataKey(enc, k.ids)
	require.NoError(t, err)
	key, err := encrypt.DataKey(out, k.ids)
	require.NoError(t, err)
	assert.NotEqual(t, old, key, "a key is only ever wrapped for the set it was made for: the added recipient never gets it")
	for _, p := range []keyPair{k, added} {
		got, err := encrypt.Decrypt(out, p.ids)
		require.NoError(t, err)
		assert.Equal(t, string(changedSecret(t)), string(got))
	}

	again, changed, err := encrypt.Update(out, []byte(strings.Replace(string(changedSecret(t)), "app: api", "app: web", 1)), both, &k.ids)
	require.NoError(t, err)
	require.True(t, changed)
	next, err := encrypt.DataKey(again, k.ids)
	require.NoError(t, err)
	assert.Equal(t, key, next, "the new key is proven for the new set: the next change reuses it")
}

func TestARemovedRecipientNeverGetsTheDataKeyOfValuesWrittenAfterItsRemoval(t *testing.T) {
	kept, removed := newKeyPair(t), newKeyPair(t)
	both := sorted(kept.recipients[0], removed.recipients[0])
	enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), both)
	require.NoError(t, err)
	old, err := encrypt.DataKey(enc, removed.ids) // what the removed recipient may have kept
	require.NoError(t, err)

	t.Run("Update encrypts a changed value under a new data key", func(t *testing.T) {
		out, changed, err := encrypt.Update(enc, changedSecret(t), kept.recipients, &kept.ids)
		require.NoError(t, err)
		require.True(t, changed)
		key, err := encrypt.DataKey(out, kept.ids)
		require.NoError(t, err)
		assert.NotEqual(t, old, key)
		_, err = encrypt.Decrypt(out, removed.ids)
		assert.ErrorIs(t, err, encrypt.ErrIdentityMismatch)
	})
	t.Run("Renew encrypts the file under a new data key (sops rotate)", func(t *testing.T) {
		out, err := encrypt.Renew(enc, kept.ids, kept.recipients)
		require.NoError(t, err)
		key, err := encrypt.DataKey(out, kept.ids)
		require.NoError(t, err)
		assert.NotEqual(t, old, key)
		got, err := encrypt.Decrypt(out, kept.ids)
		require.NoError(t, err)
		assert.Equal(t, string(readTestdata(t, "secret.yaml")), string(got))
	})
	t.Run("Renew keeps the rules of a file someone wrote with other rules, never encrypting less", func(t *testing.T) {
		const custom = "apiVersion: example.com/v1\nkind: Database\nmetadata:\n  name: db\n  namespace: team-a\nspec:\n  password: hunter2\n"
		theirs, err := encrypt.EncryptUnderRule([]byte(custom), both, "^(spec)$")
		require.NoError(t, err)
		require.NotContains(t, string(theirs), "hunter2")
		out, err := encrypt.Renew(theirs, kept.ids, kept.recipients)
		require.NoError(t, err)
		assert.NotContains(t, string(out), "hunter2")
		assert.Contains(t, string(out), "encrypted_regex: ^(spec)$")
		got, err := encrypt.Decrypt(out, kept.ids)
		require.NoError(t, err)
		assert.Equal(t, custom, string(got))
	})
	t.Run("Renew encrypts the file under a new data key when recipients are only added, so none gets a key proven for a set without it", func(t *testing.T) {
		added := newKeyPair(t)
		out, err := encrypt.Renew(enc, kept.ids, sorted(kept.recipients[0], removed.recipients[0], added.recipients[0]))
		require.NoError(t, err)
		key, err := encrypt.DataKey(out, added.ids)
		require.NoError(t, err)
		assert.NotEqual(t, old, key)
		got, err := encrypt.Decrypt(out, added.ids)
		require.NoError(t, err)
		assert.Equal(t, string(readTestdata(t, "secret.yaml")), string(got))
	})
}

func TestARemovedRecipientCannotPutBackAFileWhoseDataKeyItKnew(t *testing.T) {
	a, r := newKeyPair(t), newKeyPair(t)
	withR := sorted(a.recipients[0], r.recipients[0])
	// The operator holds a's identity. Before r was added, and while it was a recipient:
	before, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), a.recipients, encrypt.WithKeyProof(a.ids))
	require.NoError(t, err)
	during, err := encrypt.Renew(before, a.ids, withR)
	require.NoError(t, err)
	known, err := encrypt.DataKey(during, r.ids) // every key r could read
	require.NoError(t, err)
	earlier, err := encrypt.DataKey(before, a.ids)
	require.NoError(t, err)
	require.NotEqual(t, earlier, known, "adding r gave the file a new key: r never had the one proven for a alone")

	// r is removed, then puts back the file it could read, re-wrapped for a alone with
	// `sops updatekeys` (it holds the key), or the file from before it was added.
	rewrapped, err := encrypt.UpdateKeys(during, r.ids, a.recipients)
	require.NoError(t, err)
	for name, file := range map[string][]byte{"re-wrapped for the current recipients": rewrapped, "from before its addition": before} {
		t.Run(name, func(t *testing.T) {
			out, changed, err := encrypt.Update(file, changedSecret(t), a.recipients, &a.ids, encrypt.WithKeyProof(a.ids))
			require.NoError(t, err)
			require.True(t, changed)
			key, err := encrypt.DataKey(out, a.ids)
			require.NoError(t, err)
			assert.NotEqual(t, known, key, "the cluster's new value is never sealed under a key r knew")
			_, err = encrypt.Decrypt(out, r.ids)
			assert.ErrorIs(t, err, encrypt.ErrIdentityMismatch)
		})
	}
}

// digestKeys returns two digest keys: the one a file is written with and another.
func digestKeys(t *testing.T) (key, other encrypt.DigestKey) {
	t.Helper()
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	other, err = encrypt.GenerateDigestKey()
	require.NoError(t, err)
	return key, other
}

func TestUpdateWithDigestDetectsChangeWithoutIdentity(t *testing.T) {
	k := newKeyPair(t)
	key, otherKey := digestKeys(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients, encrypt.WithDigestKey(key))
	require.NoError(t, err)
	require.Contains(t, string(enc), "# "+encrypt.DigestCommentKey+": v1:")

	tests := []struct {
		name        string
		doc         []byte
		key         encrypt.DigestKey
		wantChanged bool
	}{
		{name: "the same plaintext is unchanged", doc: plain, key: key},
		{name: "the same content in another form is unchanged", doc: reordered(t, plain), key: key},
		{name: "one changed value is a change", doc: changedSecret(t), key: key, wantChanged: true},
		{name: "a changed label is a change", doc: []byte(strings.Replace(string(plain), "app: api", "app: web", 1)), key: key, wantChanged: true},
		{name: "a lost or rotated digest key costs one rewrite", doc: plain, key: otherKey, wantChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := encrypt.Update(enc, tt.doc, k.recipients, nil, encrypt.WithDigestKey(tt.key))
			require.NoError(t, err)
			assert.Equal(t, tt.wantChanged, changed)
			if !tt.wantChanged {
				assert.Equal(t, enc, out)
				return
			}
			assert.NotEqual(t, enc, out)
			got, err := encrypt.Decrypt(out, k.ids)
			require.NoError(t, err)
			assert.Equal(t, canonicalYAML(t, tt.doc), canonicalYAML(t, got))
			_, again, err := encrypt.Update(out, tt.doc, k.recipients, nil, encrypt.WithDigestKey(tt.key))
			require.NoError(t, err)
			assert.False(t, again, "the rewritten file carries a fresh digest")
		})
	}
}

func TestDigestIsFreshlySaltedOnEveryWrite(t *testing.T) {
	k := newKeyPair(t)
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	plain := readTestdata(t, "secret.yaml")
	first, err := encrypt.Encrypt(plain, k.recipients, encrypt.WithDigestKey(key))
	require.NoError(t, err)
	second, err := encrypt.Encrypt(plain, k.recipients, encrypt.WithDigestKey(key))
	require.NoError(t, err)
	assert.NotEqual(t, digestLine(t, first), digestLine(t, second),
		"equal plaintexts in two files or two points in history are not linkable")

	got, err := encrypt.Decrypt(first, k.ids)
	require.NoError(t, err)
	assert.Equal(t, string(plain), string(got), "the digest comment is not part of the plaintext")
}

// digestLine returns the digest comment line of a file.
func digestLine(t *testing.T, doc []byte) string {
	t.Helper()
	for line := range strings.SplitSeq(string(doc), "\n") {
		if strings.HasPrefix(line, "# "+encrypt.DigestCommentKey) {
			return line
		}
	}
	t.Fatal("no digest comment")
	return ""
}

func TestUpdateWithIdentityFallsBackToTheDigest(t *testing.T) {
	k, stranger := newKeyPair(t), newKeyPair(t)
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients, encrypt.WithDigestKey(key))
	require.NoError(t, err)

	out, changed, err := encrypt.Update(enc, plain, k.recipients, &stranger.ids, encrypt.WithDigestKey(key))
	require.NoError(t, err)
	assert.False(t, changed, "an identity that cannot open the file does not force a rewrite")
	assert.Equal(t, enc, out)
}

func TestUpdateErrors(t *testing.T) {
	k := newKeyPair(t)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)
	tests := []struct {
		name    string
		r       encrypt.Recipients
		ids     *encrypt.Identities
		wantErr error
	}{
		{name: "no recipients is ErrNoRecipients", r: nil, ids: &k.ids, wantErr: encrypt.ErrNoRecipients},
		{name: "a malformed recipient is ErrMalformedKey", r: encrypt.Recipients{"nope"}, ids: &k.ids, wantErr: encrypt.ErrMalformedKey},
		{name: "neither identity nor digest key is ErrNoDigestKey", r: k.recipients, ids: nil, wantErr: encrypt.ErrNoDigestKey},
		{name: "empty identities count as none", r: k.recipients, ids: &encrypt.Identities{}, wantErr: encrypt.ErrNoDigestKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := encrypt.Update(enc, plain, tt.r, tt.ids)
			require.ErrorIs(t, err, tt.wantErr)
			assertNoSecrets(t, err.Error(), k.private)
		})
	}
}

func TestUpdateKeysRewrapsWithoutTouchingValues(t *testing.T) {
	old, next := newKeyPair(t), newKeyPair(t)
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	plain := readTestdata(t, "secret.yaml")
	enc, err := encrypt.Encrypt(plain, old.recipients, encrypt.WithDigestKey(key))
	require.NoError(t, err)

	need, err := encrypt.NeedsUpdateKeys(enc, next.recipients)
	require.NoError(t, err)
	assert.True(t, need)

	out, err := encrypt.UpdateKeys(enc, old.ids, next.recipients)
	require.NoError(t, err)

	assert.Equal(t, ciphertexts(enc), ciphertexts(out), "every value keeps its ciphertext")
	assert.ElementsMatch(t, []string{"recipient", "-----BEGIN AGE ENCRYPTED FILE-----"}, uniq(diffKeys(string(enc), string(out))),
		"only the recipient stanza changes")
	got, err := encrypt.Decrypt(out, next.ids)
	require.NoError(t, err, "the new identity opens the file")
	assert.Equal(t, string(plain), string(got))
	_, err = encrypt.Decrypt(out, old.ids)
	require.ErrorIs(t, err, encrypt.ErrIdentityMismatch, "the removed recipient's wrapping is gone")

	need, err = encrypt.NeedsUpdateKeys(out, next.recipients)
	require.NoError(t, err)
	assert.False(t, need)
	again, err := encrypt.UpdateKeys(out, next.ids, next.recipients)
	require.NoError(t, err)
	assert.Equal(t, out, again, "re-wrapping for the same recipients changes nothing")

	_, changed, err := encrypt.Update(out, plain, next.recipients, nil, encrypt.WithDigestKey(key))
	require.NoError(t, err)
	assert.False(t, changed, "the digest survives re-wrapping")
}

func TestUpdateKeysKeepsTheWrappingOfRemainingRecipients(t *testing.T) {
	a, b := newKeyPair(t), newKeyPair(t)
	enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), a.recipients)
	require.NoError(t, err)

	out, err := encrypt.UpdateKeys(enc, a.ids, sorted(a.recipients[0], b.recipients[0]))
	require.NoError(t, err)
	blocks := ageBlock.FindAllString(string(out), -1)
	require.Len(t, blocks, 2)
	assert.Contains(t, blocks, ageBlock.FindString(string(enc)), "a's wrapped key is kept as it was")
	for _, p := range []keyPair{a, b} {
		_, err := encrypt.Decrypt(out, p.ids)
		require.NoError(t, err)
	}
}

func TestRewrappingAFileOfSeveralKeyGroupsWrapsTheDataKeyItself(t *testing.T) {
	a, b, c := newKeyPair(t), newKeyPair(t), newKeyPair(t)
	both, err := encrypt.ParseIdentities(map[string][]byte{"a.agekey": []byte(a.private), "b.agekey": []byte(b.private)})
	require.NoError(t, err)
	shamir, err := encrypt.EncryptShamir(readTestdata(t, "secret.yaml"), append(slices.Clone(a.recipients), b.recipients...))
	require.NoError(t, err)
	_, err = encrypt.Decrypt(shamir, both)
	require.NoError(t, err, "two shares open it")

	// A recipient added: each key of the file wraps a share, not the data key, so none is kept.
	out, err := encrypt.Renew(shamir, both, slices.Concat(a.recipients, b.recipients, c.recipients))
	require.NoError(t, err)
	for _, k := range []keyPair{a, b, c} {
		got, err := encrypt.Decrypt(out, k.ids)
		require.NoError(t, err, "each recipient opens the re-wrapped file alone")
		assert.Equal(t, string(readTestdata(t, "secret.yaml")), string(got))
	}
}

func TestUpdateKeysErrors(t *testing.T) {
	k, stranger := newKeyPair(t), newKeyPair(t)
	enc, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients)
	require.NoError(t, err)
	tests := []struct {
		name    string
		doc     []byte
		ids     encrypt.Identities
		r       encrypt.Recipients
		wantErr error
	}{
		{name: "without identity it is ErrNoIdentity", doc: enc, r: stranger.recipients, wantErr: encrypt.ErrNoIdentity},
		{name: "with a wrong identity it is ErrIdentityMismatch", doc: enc, ids: stranger.ids, r: stranger.recipients, wantErr: encrypt.ErrIdentityMismatch},
		{name: "to nobody it is ErrNoRecipients", doc: enc, ids: k.ids, wantErr: encrypt.ErrNoRecipients},
		{name: "a plaintext file is ErrNotEncrypted", doc: readTestdata(t, "secret.yaml"), ids: k.ids, r: stranger.recipients, wantErr: encrypt.ErrNotEncrypted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encrypt.UpdateKeys(tt.doc, tt.ids, tt.r)
			require.ErrorIs(t, err, tt.wantErr)
			assertNoSecrets(t, err.Error(), k.private, stranger.private)
		})
	}
}

// diffKeys names the differing lines of two files (any line counts), by the
// text before their colon.
func diffKeys(a, b string) []string {
	seen := map[string]bool{}
	for line := range strings.SplitSeq(a, "\n") {
		seen[line] = true
	}
	var out []string
	for line := range strings.SplitSeq(b, "\n") {
		if !seen[line] {
			trimmed := strings.TrimLeft(strings.TrimSpace(line), "- ")
			key, _, found := strings.Cut(trimmed, ":")
			if !found || strings.HasPrefix(trimmed, "-----") {
				key = "-----BEGIN AGE ENCRYPTED FILE-----"
			}
			out = append(out, key)
		}
	}
	return out
}

// uniq removes duplicates, keeping order.
func uniq(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func TestUpdateMovesAFileWrittenBeforeAnnotationsWereEncryptedToTheCurrentRule(t *testing.T) {
	k := newKeyPair(t)
	legacy, err := encrypt.EncryptUnderLegacyRule(readTestdata(t, "secret.yaml"), k.recipients)
	require.NoError(t, err)
	require.Contains(t, string(legacy), "owner: payments", "the legacy rule left annotation values readable")
	require.Contains(t, string(legacy), "encrypted_regex: "+encrypt.LegacyEncryptedRegex)

	t.Run("an unchanged object leaves the file as it is", func(t *testing.T) {
		out, changed, err := encrypt.Update(legacy, readTestdata(t, "secret.yaml"), k.recipients, &k.ids)
		require.NoError(t, err)
		assert.False(t, changed)
		assert.Equal(t, string(legacy), string(out))
	})
	t.Run("a change encrypts the annotation values under a new data key, the old one unproven", func(t *testing.T) {
		out, changed, err := encrypt.Update(legacy, changedSecret(t), k.recipients, &k.ids, encrypt.WithKeyProof(k.ids))
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Contains(t, string(out), "encrypted_regex: "+encrypt.EncryptedRegex)
		assert.NotContains(t, string(out), "payments")
		assertNoSecrets(t, string(out), k.private)
		before, after := ciphertexts(legacy), ciphertexts(out)
		for _, key := range []string{"password", "username", "config.ini"} {
			assert.NotEqual(t, before[key], after[key], "%s: a file written before data-key proofs gets a new key", key)
		}
		assert.Contains(t, after, "owner", "the annotation value is ciphertext now")
		assert.Contains(t, string(out), "# gitops-reverser.dev/data-key: v2:", "the new key is proven: the next change reuses it")

		got, err := encrypt.Decrypt(out, k.ids)
		require.NoError(t, err)
		assert.Equal(t, string(changedSecret(t)), string(got))
	})
}

func TestRenew(t *testing.T) {
	k, other := newKeyPair(t), newKeyPair(t)
	legacy, err := encrypt.EncryptUnderLegacyRule(readTestdata(t, "secret.yaml"), k.recipients)
	require.NoError(t, err)
	current, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients)
	require.NoError(t, err)

	t.Run("moves a file under the earlier rule to the current one, keeping every other value's ciphertext", func(t *testing.T) {
		assert.True(t, encrypt.UsesEarlierRule(legacy))
		out, err := encrypt.Renew(legacy, k.ids, k.recipients)
		require.NoError(t, err)
		assert.False(t, encrypt.UsesEarlierRule(out))
		assert.NotContains(t, string(out), "payments")
		assertNoSecrets(t, string(out), k.private)
		before, after := ciphertexts(legacy), ciphertexts(out)
		for _, key := range []string{"password", "token", "username", "config.ini"} {
			assert.Equal(t, before[key], after[key], "%s keeps its exact ciphertext", key)
		}
		got, err := encrypt.Decrypt(out, k.ids)
		require.NoError(t, err)
		assert.Equal(t, string(readTestdata(t, "secret.yaml")), string(got))
	})
	t.Run("re-wraps a file under the earlier rule for new recipients in the same step", func(t *testing.T) {
		out, err := encrypt.Renew(legacy, k.ids, other.recipients)
		require.NoError(t, err)
		assert.False(t, encrypt.UsesEarlierRule(out))
		_, err = encrypt.Decrypt(out, other.ids)
		require.NoError(t, err)
		_, err = encrypt.Decrypt(out, k.ids)
		assert.ErrorIs(t, err, encrypt.ErrIdentityMismatch)
	})
	t.Run("is UpdateKeys for a file under the current rule", func(t *testing.T) {
		assert.False(t, encrypt.UsesEarlierRule(current))
		out, err := encrypt.Renew(current, k.ids, k.recipients)
		require.NoError(t, err)
		assert.Equal(t, string(current), string(out))
	})
	t.Run("needs an identity that opens the file", func(t *testing.T) {
		_, err := encrypt.Renew(legacy, other.ids, other.recipients)
		assert.ErrorIs(t, err, encrypt.ErrIdentityMismatch)
	})
	t.Run("re-wraps nothing for new recipients in a file whose MAC fails", func(t *testing.T) {
		renamed := strings.Replace(string(current), "name: db-credentials", "name: renamed", 1)
		require.NotEqual(t, string(current), renamed, "a plaintext field changed past the MAC")
		_, err := encrypt.Renew([]byte(renamed), k.ids, sorted(k.recipients[0], other.recipients[0]))
		assert.ErrorIs(t, err, encrypt.ErrIntegrity)
	})
}

func TestAFileUnderADataKeyTheOperatorDidNotChooseNeverCarriesTheClustersNewValue(t *testing.T) {
	k := newKeyPair(t)
	// Anyone who can push can write a valid file for the public recipients, under a data
	// key they keep: re-sealing a new value under it would hand them that value.
	planted, err := encrypt.EncryptUnderRule(readTestdata(t, "secret.yaml"), k.recipients, encrypt.EncryptedRegex)
	require.NoError(t, err)
	own, err := encrypt.Encrypt(readTestdata(t, "secret.yaml"), k.recipients, encrypt.WithKeyProof(k.ids))
	require.NoError(t, err)
	proof := regexp.MustCompile(`(?m)^#\s*gitops-reverser\.dev/data-key: .*\n`).FindString(string(own))
	require.NotEmpty(t, proof, "the operator's own files carry a proof of their data key")

	for name, file := range map[string][]byte{
		"a file without a proof":                  planted,
		"a file with a proof copied from another": []byte(proof + string(planted)),
	} {
		t.Run(name, func(t *testing.T) {
			out, changed, err := encrypt.Update(file, changedSecret(t), k.recipients, &k.ids)
			require.NoError(t, err)
			assert.True(t, changed)
			assert.NotEqual(t, ageBlock.FindAllString(string(file), -1), ageBlock.FindAllString(string(out), -1),
				"the new value is under a new data key")
			before, after := ciphertexts(file), ciphertexts(out)
			for key := range before {
				assert.NotEqual(t, before[key], after[key], "%s", key)
			}
			got, err := encrypt.Decrypt(out, k.ids)
			require.NoError(t, err)
			assert.Equal(t, string(changedSecret(t)), string(got), "the proof comment is not part of the document")

			again, changed, err := encrypt.Update(out, changedSecret(t), k.recipients, &k.ids)
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Equal(t, string(out), string(again))
		})
	}
}

func TestRenewNeverProvesADataKeyTheOperatorDidNotChoose(t *testing.T) {
	k := newKeyPair(t)
	planted, err := encrypt.EncryptUnderLegacyRule(readTestdata(t, "secret.yaml"), k.recipients) // anyone's
	require.NoError(t, err)
	renewed, err := encrypt.Renew(planted, k.ids, k.recipients)
	require.NoError(t, err)
	assert.False(t, encrypt.UsesEarlierRule(renewed))
	assert.NotContains(t, string(renewed), "gitops-reverser.dev/data-key", "moved to the current rule under its own key, unproven")
	out, _, err := encrypt.Update(renewed, changedSecret(t), k.recipients, &k.ids)
	require.NoError(t, err)
	assert.NotEqual(t, ageBlock.FindAllString(string(renewed), -1), ageBlock.FindAllString(string(out), -1),
		"so its next value gets a new data key")
}

func TestAChangeKeepsTheRulesOfAFileSomeoneEncryptedMoreOf(t *testing.T) {
	k, stranger := newKeyPair(t), newKeyPair(t)
	const operatorRule = "encrypted_regex: ^(data|stringData|annotations)$"
	tests := []struct {
		name     string
		rule     string
		more     func(*sops.Metadata) // rules besides encrypted_regex
		ids      encrypt.Identities
		wantRule string
		hidden   []string
		digest   bool // the writer keeps a digest (recipients-only mode)
	}{
		{
			name: "keeps a rule that encrypts labels too, when the operator opens the file",
			rule: "^(data|stringData|annotations|labels)$", ids: k.ids,
			wantRule: "encrypted_regex: ^(data|stringData|annotations|labels)$", hidden: []string{"app: api", "payments"},
		},
		{
			name: "keeps a rule that encrypts labels too, when no identity opens the file",
			rule: "^(data|stringData|annotations|labels)$", ids: stranger.ids,
			wantRule: "encrypted_regex: ^(data|stringData|annotations|labels)$", hidden: []string{"app: api", "payments"},
		},
		{
			name: "keeps a rule that encrypts every value but the object's name and kind",
			rule: "^(data|stringData|labels|annotations|type)$", ids: k.ids,
			wantRule: "encrypted_regex: ^(data|stringData|labels|annotations|type)$", hidden: []string{"app: api", "Opaque"},
		},
		{
			name: "gives way to the operator's rule when the file's would hide the object's name, by which the writer finds it",
			rule: ".*", ids: k.ids,
			wantRule: operatorRule, hidden: []string{"payments"},
		},
		{
			name: "gives way to the operator's rule when the file's would leave an annotation readable",
			rule: "^(data|stringData|labels)$", ids: k.ids,
			wantRule: operatorRule, hidden: []string{"payments"},
		},
		{
			name: "gives way to the operator's rule when sops cannot compile the file's",
			rule: "(", ids: k.ids,
			wantRule: operatorRule, hidden: []string{"payments"},
		},
		{
			name: "gives way to the operator's rule when the file's MAC leaves the readable fields out (mac_only_encrypted, which anyone who can push may set)",
			rule: "^(data|stringData|annotations|labels)$", more: func(md *sops.Metadata) { md.MACOnlyEncrypted = true }, ids: k.ids,
			wantRule: operatorRule, hidden: []string{"payments"},
		},
		{
			name: "gives way to the operator's rule, rather than failing, when the file's comment rule would make sops refuse it",
			rule: "^(data|stringData|annotations|labels)$", more: func(md *sops.Metadata) { md.UnencryptedCommentRegex = "ENC" }, ids: k.ids,
			wantRule: operatorRule, hidden: []string{"payments"},
		},
		{
			name: "keeps a rule that leaves only the object's identity readable, though it encrypts the writer's data-key proof, which a file under someone else's rules never needs",
			more: func(md *sops.Metadata) {
				md.EncryptedRegex, md.UnencryptedRegex = "", "^(apiVersion|kind|name|namespace)$"
			}, ids: k.ids,
			wantRule: "unencrypted_regex: ^(apiVersion|kind|name|namespace)$", hidden: []string{"app: api", "payments", "Opaque"},
		},
		{
			name: "gives way to the operator's rule when the file's would encrypt the writer's digest, by which it tells an unchanged file without an identity",
			more: func(md *sops.Metadata) {
				md.EncryptedRegex, md.UnencryptedRegex = "", "^(apiVersion|kind|name|namespace)$"
			}, ids: stranger.ids, digest: true,
			wantRule: operatorRule, hidden: []string{"payments"},
		},
	}
	key, _ := digestKeys(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			theirs, err := encrypt.EncryptUnderMetadata(readTestdata(t, "secret.yaml"), k.recipients, func(md *sops.Metadata) {
				md.EncryptedRegex = tt.rule
				if tt.more != nil {
					tt.more(md)
				}
			})
			require.NoError(t, err)

			var opts []encrypt.Option
			if tt.digest {
				opts = append(opts, encrypt.WithDigestKey(key))
			}
			out, changed, err := encrypt.Update(theirs, changedSecret(t), k.recipients, &tt.ids, opts...)
			require.NoError(t, err)
			assert.True(t, changed)
			assert.Contains(t, string(out), tt.wantRule)
			assertNoSecrets(t, string(out))
			for _, value := range tt.hidden {
				assert.NotContains(t, string(out), value)
			}
			got, err := encrypt.Decrypt(out, k.ids)
			require.NoError(t, err)
			assert.Equal(t, string(changedSecret(t)), string(got))
		})
	}
}

func TestAFileKeptUnderSomeoneElsesRulesIsLeftAsItIsWhileNothingChanges(t *testing.T) {
	k := newKeyPair(t)
	theirs, err := encrypt.EncryptUnderMetadata(readTestdata(t, "secret.yaml"), k.recipients, func(md *sops.Metadata) {
		md.EncryptedRegex, md.UnencryptedRegex = "", "^(apiVersion|kind|name|namespace)$"
	})
	require.NoError(t, err)
	out, changed, err := encrypt.Update(theirs, changedSecret(t), k.recipients, &k.ids)
	require.NoError(t, err)
	require.True(t, changed)
	require.Contains(t, string(out), "unencrypted_regex: ^(apiVersion|kind|name|namespace)$", "kept")

	again, changed, err := encrypt.Update(out, changedSecret(t), k.recipients, &k.ids)
	require.NoError(t, err)
	assert.False(t, changed, "its hidden data-key proof makes no rewrite at the next listing")
	assert.Equal(t, out, again)
}

func TestARewrapWithoutAnIdentityKeepsTheRulesOfAFileSomeoneEncryptedMoreOf(t *testing.T) {
	k, added := newKeyPair(t), newKeyPair(t)
	const rule = "^(data|stringData|annotations|labels)$"
	theirs, err := encrypt.EncryptUnderRule(readTestdata(t, "secret.yaml"), k.recipients, rule)
	require.NoError(t, err)

	out, err := encrypt.Reencrypt(theirs, readTestdata(t, "secret.yaml"), sorted(k.recipients[0], added.recipients[0]), nil)
	require.NoError(t, err)
	assert.Contains(t, string(out), "encrypted_regex: "+rule)
	assert.NotContains(t, string(out), "app: api", "the labels it encrypted stay encrypted")
	got, err := encrypt.Decrypt(out, added.ids)
	require.NoError(t, err)
	assert.Equal(t, string(readTestdata(t, "secret.yaml")), string(got))

	t.Run("and gives way to the operator's rule where a change would", func(t *testing.T) {
		macOnly, err := encrypt.EncryptUnderMetadata(readTestdata(t, "secret.yaml"), k.recipients, func(md *sops.Metadata) {
			md.EncryptedRegex, md.MACOnlyEncrypted = rule, true
		})
		require.NoError(t, err)
		out, err := encrypt.Reencrypt(macOnly, readTestdata(t, "secret.yaml"), added.recipients, nil)
		require.NoError(t, err)
		assert.Contains(t, string(out), "encrypted_regex: ^(data|stringData|annotations)$")
		assert.NotContains(t, string(out), "mac_only_encrypted: true")
	})
	t.Run("and encrypts a file that is not a sops file under the operator's rule", func(t *testing.T) {
		out, err := encrypt.Reencrypt(readTestdata(t, "secret.yaml"), readTestdata(t, "secret.yaml"), added.recipients, nil)
		require.NoError(t, err)
		assert.Contains(t, string(out), "encrypted_regex: ^(data|stringData|annotations)$")
		assertNoSecrets(t, string(out))
	})
}

func TestRenewGivesWayToTheOperatorsRuleWhereAChangeWould(t *testing.T) {
	k, added := newKeyPair(t), newKeyPair(t)
	macOnly, err := encrypt.EncryptUnderMetadata(readTestdata(t, "secret.yaml"), k.recipients, func(md *sops.Metadata) {
		md.EncryptedRegex, md.MACOnlyEncrypted = "^(data|stringData|annotations|labels)$", true
	})
	require.NoError(t, err)

	out, err := encrypt.Renew(macOnly, k.ids, sorted(k.recipients[0], added.recipients[0]))
	require.NoError(t, err)
	assert.NotContains(t, string(out), "mac_only_encrypted: true", "the name and labels are under the MAC again")
	assert.Contains(t, string(out), "encrypted_regex: ^(data|stringData|annotations)$")
	got, err := encrypt.Decrypt(out, added.ids)
	require.NoError(t, err)
	assert.Equal(t, string(readTestdata(t, "secret.yaml")), string(got))
}

func TestDigestShowsDocument(t *testing.T) {
	k := newKeyPair(t)
	key, otherKey := digestKeys(t)
	plain := readTestdata(t, "secret.yaml")
	withDigest, err := encrypt.Encrypt(plain, k.recipients, encrypt.WithDigestKey(key))
	require.NoError(t, err)
	withoutDigest, err := encrypt.Encrypt(plain, k.recipients)
	require.NoError(t, err)

	tests := []struct {
		name    string
		file    []byte
		doc     []byte
		opts    []encrypt.Option
		want    bool
		wantErr error
	}{
		{name: "shows the document the file was written from", file: withDigest, doc: plain, opts: []encrypt.Option{encrypt.WithDigestKey(key)}, want: true},
		{name: "shows the same content in another form", file: withDigest, doc: reordered(t, plain), opts: []encrypt.Option{encrypt.WithDigestKey(key)}, want: true},
		{name: "tells a changed value from it", file: withDigest, doc: changedSecret(t), opts: []encrypt.Option{encrypt.WithDigestKey(key)}},
		{name: "reads a digest made under another key as another document", file: withDigest, doc: plain, opts: []encrypt.Option{encrypt.WithDigestKey(otherKey)}},
		{name: "cannot tell without a digest key", file: withDigest, doc: plain, wantErr: encrypt.ErrNoDigestKey},
		{name: "cannot tell a file that carries no digest", file: withoutDigest, doc: plain, opts: []encrypt.Option{encrypt.WithDigestKey(key)}, wantErr: encrypt.ErrNoDigest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encrypt.DigestShowsDocument(tt.file, tt.doc, tt.opts...)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
