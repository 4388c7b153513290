package encrypt_test

import (
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// keyPair is one generated age identity with its parsed forms.
type keyPair struct {
	private    string
	ids        encrypt.Identities
	recipients encrypt.Recipients
}

// newKeyPair generates an identity and parses it the way the controller
// will: from a Secret's data under a .agekey key.
func newKeyPair(t testing.TB) keyPair {
	t.Helper()
	private, public, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	ids, err := encrypt.ParseIdentities(map[string][]byte{"identity.agekey": []byte(private + "\n")})
	require.NoError(t, err)
	recipients, err := encrypt.ParseRecipients([]string{public})
	require.NoError(t, err)
	return keyPair{private: private, ids: ids, recipients: recipients}
}

// readTestdata reads a file under testdata/.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// assertGolden compares got with testdata/name, rewriting it with -update.
func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o600))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

// secretValues are the plaintext values of testdata/secret.yaml, decoded.
func secretValues() []string {
	return []string{
		"correct-horse-battery-staple",
		"ghp_SecretTokenValue1234567890",
		"api-service-account",
		"s3cr3t-dsn-password",
		"dsn=postgres://api:s3cr3t-dsn-password@db:5432/app",
	}
}

// forbidden lists every form of the secret values that must never appear in
// encrypted output or error messages: raw, base64 (as in data:) and the
// base64 of what sops encrypts.
func forbidden() []string {
	var out []string
	for _, v := range secretValues() {
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	return append(out,
		"Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==",
		"Z2hwX1NlY3JldFRva2VuVmFsdWUxMjM0NTY3ODkw",
		"YXBpLXNlcnZpY2UtYWNjb3VudA==",
	)
}

// assertNoSecrets fails if text holds any secret value or private key.
func assertNoSecrets(t *testing.T, text string, privateKeys ...string) {
	t.Helper()
	for _, s := range append(forbidden(), privateKeys...) {
		assert.NotContains(t, text, s)
	}
	assert.NotContains(t, strings.ToUpper(text), "AGE-SECRET-KEY-1", "no private key")
}

// encLine matches one encrypted value line: "  key: ENC[...]".
var encLine = regexp.MustCompile(`(?m)^\s+([^\s:]+): (ENC\[AES256_GCM,[^\]]+\])$`)

// ciphertexts maps each encrypted value's key to its ciphertext, leaving
// out sops' own mac.
func ciphertexts(doc []byte) map[string]string {
	out := map[string]string{}
	for _, m := range encLine.FindAllStringSubmatch(string(doc), -1) {
		if m[1] != "mac" {
			out[m[1]] = m[2]
		}
	}
	return out
}

// ageBlock matches one wrapped data key in a file (an age armor block).
var ageBlock = regexp.MustCompile(`(?s)-----BEGIN AGE ENCRYPTED FILE-----.*?-----END AGE ENCRYPTED FILE-----`)
