package encrypt_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/getsops/sops/v3/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

func TestSopsLogsNothingOnceSilencedNotEvenAPlaintextCommentInAnEncryptedSection(t *testing.T) {
	kp := newKeyPair(t)
	enc, err := encrypt.Encrypt([]byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aHVudGVyMg==\n"), kp.recipients)
	require.NoError(t, err)
	withComment := strings.Replace(string(enc), "\ndata:\n", "\ndata:\n  # old password hunter2\n", 1)
	require.NotEqual(t, string(enc), withComment)

	var logged bytes.Buffer
	for _, l := range logging.Loggers {
		l.SetOutput(&logged)
	}
	_, err = encrypt.Decrypt([]byte(withComment), kp.ids)
	require.NoError(t, err)
	require.Contains(t, logged.String(), "hunter2", "sops writes such a comment to stderr by default: the reason for silencing it")

	encrypt.SilenceLibraryLogs()
	for name, l := range logging.Loggers {
		assert.Equal(t, io.Discard, l.Out, "sops logger %s", name)
	}
}
