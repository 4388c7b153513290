package encrypt_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

func TestParseRecipients(t *testing.T) {
	a, b := newKeyPair(t), newKeyPair(t)
	pubA, pubB := a.recipients[0], b.recipients[0]
	tests := []struct {
		name    string
		in      []string
		want    encrypt.Recipients
		wantErr error
		wantMsg string
	}{
		{
			name: "valid keys come back trimmed, sorted and without duplicates",
			in:   []string{" " + pubB + "\n", pubA, pubB},
			want: sorted(pubA, pubB),
		},
		{
			name:    "an empty list is ErrNoRecipients",
			in:      nil,
			wantErr: encrypt.ErrNoRecipients,
		},
		{
			name:    "a malformed entry is ErrMalformedKey naming its index",
			in:      []string{pubA, "age1notakey"},
			wantErr: encrypt.ErrMalformedKey,
			wantMsg: "recipient 1 ",
		},
		{
			name:    "an empty entry is ErrMalformedKey",
			in:      []string{"  "},
			wantErr: encrypt.ErrMalformedKey,
			wantMsg: "recipient 0 is empty",
		},
		{
			name:    "a private key pasted as a recipient is refused without being echoed",
			in:      []string{pubA, a.private},
			wantErr: encrypt.ErrMalformedKey,
			wantMsg: "recipient 1 is an age private key",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encrypt.ParseRecipients(tt.in)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), tt.wantMsg)
				for _, in := range tt.in {
					if strings.TrimSpace(in) != "" && in != pubA {
						assert.NotContains(t, err.Error(), strings.TrimSpace(in), "the entry is not echoed")
					}
				}
				assertNoSecrets(t, err.Error(), a.private)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// sorted returns recipients in sorted order.
func sorted(keys ...string) encrypt.Recipients {
	out := encrypt.Recipients(slices.Clone(keys))
	slices.Sort(out)
	return out
}

func TestParseIdentities(t *testing.T) {
	a, b := newKeyPair(t), newKeyPair(t)
	keygenFile := "# created: 2024-01-01T00:00:00Z\n# public key: " + a.recipients[0] + "\n" + a.private + "\n"
	tests := []struct {
		name           string
		data           map[string][]byte
		wantRecipients encrypt.Recipients
		wantErr        error
		wantMsg        string
	}{
		{
			name:           "age-keygen output under a .agekey key is read and its public key derived",
			data:           map[string][]byte{"team.agekey": []byte(keygenFile)},
			wantRecipients: a.recipients,
		},
		{
			name: "several .agekey keys and several lines all count, other keys are ignored",
			data: map[string][]byte{
				"a.agekey":  []byte(a.private),
				"b.agekey":  []byte("\r\n" + b.private + "\r\n"),
				"README":    []byte("not a key"),
				"other.txt": []byte(a.private),
			},
			wantRecipients: sorted(a.recipients[0], b.recipients[0]),
		},
		{
			name:    "a Secret without .agekey keys is ErrNoIdentity",
			data:    map[string][]byte{"identity.txt": []byte(a.private)},
			wantErr: encrypt.ErrNoIdentity,
		},
		{
			name:    "a .agekey key holding only comments is ErrNoIdentity",
			data:    map[string][]byte{"x.agekey": []byte("# nothing\n")},
			wantErr: encrypt.ErrNoIdentity,
		},
		{
			name:    "a malformed key is ErrMalformedKey naming data key and line, not content",
			data:    map[string][]byte{"team.agekey": []byte("# header\n" + a.private[:len(a.private)-3] + "xyz\n")},
			wantErr: encrypt.ErrMalformedKey,
			wantMsg: `data key "team.agekey" line 2`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encrypt.ParseIdentities(tt.data)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), tt.wantMsg)
				assertNoSecrets(t, err.Error(), a.private, a.private[:len(a.private)-3])
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantRecipients, got.Recipients())
		})
	}
}

func TestIdentitiesNeverPrintTheirKeys(t *testing.T) {
	a := newKeyPair(t)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		t.Run(verb, func(t *testing.T) {
			out := fmt.Sprintf(verb, a.ids) + fmt.Sprintf(verb, struct{ I encrypt.Identities }{a.ids})
			assert.NotContains(t, strings.ToUpper(out), "AGE-SECRET-KEY")
			assert.Contains(t, out, "redacted")
		})
	}
}

func TestGenerateIdentity(t *testing.T) {
	private, public, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(private, "AGE-SECRET-KEY-1"), "private key in age format")
	assert.True(t, strings.HasPrefix(public, "age1"), "public key in age format")
	ids, err := encrypt.ParseIdentities(map[string][]byte{"generated.agekey": []byte(private)})
	require.NoError(t, err)
	assert.Equal(t, encrypt.Recipients{public}, ids.Recipients(), "the public key is the identity's")

	_, other, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	assert.NotEqual(t, public, other, "each call creates a new identity")
}

func TestDigestKey(t *testing.T) {
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	assert.Len(t, key, encrypt.DigestKeySize)

	parsed, err := encrypt.ParseDigestKey(key)
	require.NoError(t, err)
	assert.Equal(t, key, parsed)

	_, err = encrypt.ParseDigestKey([]byte("short"))
	require.ErrorIs(t, err, encrypt.ErrMalformedKey)
	assert.NotContains(t, err.Error(), "short")

	for _, verb := range []string{"%v", "%x", "%d", "%s", "%#v"} {
		assert.Equal(t, "DigestKey(redacted)", fmt.Sprintf(verb, key), verb)
	}
}

func TestHoldsIdentity(t *testing.T) {
	private, public, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	tests := []struct {
		name  string
		value string
		want  bool
	}{
		{name: "finds a key file as age-keygen writes it", value: "# created: 2026-12-03\n# public key: " + public + "\n" + private + "\n", want: true},
		{name: "finds a key in lower case", value: strings.ToLower(private), want: true},
		{name: "finds a key inside other text", value: `{"key":"` + private + `"}`, want: true},
		{name: "finds a post-quantum key", value: "AGE-SECRET-KEY-PQ-1" + strings.Repeat("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 2), want: true},
		{name: "finds a key after a separator", value: "key=" + private, want: true},
		{name: "does not mistake a public key for one", value: public},
		{name: "does not mistake a name that merely ends in age-secret-key-1 for one", value: "object-storage-secret-key-1"},
		{name: "does not mistake a prefix glued to a word for one", value: "STORAGE-SECRET-KEY-1" + strings.Repeat("Q", 60)},
		{name: "does not mistake a prefix followed by too few key characters for one", value: "AGE-SECRET-KEY-1" + strings.Repeat("Q", 57)},
		{name: "does not mistake a prefix followed by characters outside bech32 for one", value: "AGE-SECRET-KEY-1" + strings.Repeat("B", 60)},
		{name: "does not mistake an ordinary value for one", value: "hunter2"},
		{name: "does not mistake an empty value for one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, encrypt.HoldsIdentity([]byte(tt.value)))
		})
	}
}
