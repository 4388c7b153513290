package encrypt_test

import (
	"os"
	"path/filepath"
	"testing"

	sopsconfig "github.com/getsops/sops/v3/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

// Fixed, valid recipients so the golden file is stable.
const (
	recipientA = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
	recipientB = "age1fnsaqddcd0gc0dfe3xuyv8ftp0c63yqdlc922zr85rm6fqyhw4pqpprrpy"
)

func TestSopsConfigGolden(t *testing.T) {
	r, err := encrypt.ParseRecipients([]string{recipientB, recipientA})
	require.NoError(t, err)
	got, err := encrypt.SopsConfig("clusters/prod/team-a", r)
	require.NoError(t, err)
	assertGolden(t, "sops-config.golden.yaml", got)

	again, err := encrypt.SopsConfig("clusters/prod/team-a", encrypt.Recipients{recipientA, recipientB, recipientA})
	require.NoError(t, err)
	assert.Equal(t, got, again, "the same recipient set renders the same bytes")
}

func TestSopsConfigIsReadBySopsAsOurRule(t *testing.T) {
	dir := t.TempDir()
	conf, err := encrypt.SopsConfig("team-a", encrypt.Recipients{recipientA, recipientB})
	require.NoError(t, err)
	confPath := filepath.Join(dir, encrypt.ConfigFileName)
	require.NoError(t, os.WriteFile(confPath, conf, 0o600))

	tests := []struct {
		name      string
		file      string
		wantMatch bool
	}{
		{name: "an encrypted manifest in the folder matches", file: filepath.Join(dir, "secret-db.sops.yaml"), wantMatch: true},
		{name: "an encrypted manifest in a subfolder matches", file: filepath.Join(dir, "apps", "secret-db.sops.yaml"), wantMatch: true},
		{name: "a relative path as typed matches", file: "secret-db.sops.yaml", wantMatch: true},
		{name: "a plain manifest does not match", file: filepath.Join(dir, "deployment.yaml")},
		{name: "the config file itself does not match", file: confPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rule, err := sopsconfig.LoadCreationRuleForFile(confPath, tt.file, nil)
			if !tt.wantMatch {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, encrypt.EncryptedRegex, rule.EncryptedRegex)
			require.Len(t, rule.KeyGroups, 1)
			var got []string
			for _, key := range rule.KeyGroups[0] {
				got = append(got, key.ToString())
			}
			assert.ElementsMatch(t, []string{recipientA, recipientB}, got)
		})
	}
}

func TestSopsConfigErrors(t *testing.T) {
	_, err := encrypt.SopsConfig("team-a", nil)
	require.ErrorIs(t, err, encrypt.ErrNoRecipients)
	_, err = encrypt.SopsConfig("team-a", encrypt.Recipients{"age1\n  evil: true"})
	require.ErrorIs(t, err, encrypt.ErrMalformedKey)
}

// canonicalYAML decodes YAML for semantic comparison.
func canonicalYAML(t *testing.T, doc []byte) any {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(doc, &v))
	return v
}
