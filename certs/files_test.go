package certs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestSyncFiles(t *testing.T) {
	ca := newTestCA(t, t0, 10*time.Hour)
	first := issueTest(t, ca, testNames, t0, time.Hour)
	second := issueTest(t, ca, testNames, t0, time.Hour)
	data := func(p pair) map[string][]byte {
		return map[string][]byte{corev1.TLSCertKey: p.crt, corev1.TLSPrivateKeyKey: p.key}
	}
	dir := filepath.Join(t.TempDir(), "certs")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return string(b)
	}

	t.Run("a missing directory is created and both files are written, the key private", func(t *testing.T) {
		wrote, err := syncFiles(dir, data(first))
		require.NoError(t, err)
		assert.True(t, wrote)
		assert.Equal(t, string(first.crt), read("tls.crt"))
		assert.Equal(t, string(first.key), read("tls.key"))
		info, err := os.Stat(filepath.Join(dir, "tls.key"))
		require.NoError(t, err)
		assert.Equal(t, keyFileMode, info.Mode().Perm())
	})
	t.Run("unchanged content is not written again", func(t *testing.T) {
		wrote, err := syncFiles(dir, data(first))
		require.NoError(t, err)
		assert.False(t, wrote)
	})
	t.Run("a rotated pair replaces both files and leaves only the current pair behind", func(t *testing.T) {
		wrote, err := syncFiles(dir, data(second))
		require.NoError(t, err)
		assert.True(t, wrote)
		assert.Equal(t, string(second.crt), read("tls.crt"))
		assert.Equal(t, string(second.key), read("tls.key"))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Len(t, names, 4, names)
		assert.Equal(t, []string{"..data", "tls.crt", "tls.key"}, []string{names[0], names[2], names[3]})
		assert.True(t, strings.HasPrefix(names[1], "..pair-"), names)
	})
	t.Run("a certificate with another certificate's key writes nothing", func(t *testing.T) {
		wrote, err := syncFiles(dir, map[string][]byte{corev1.TLSCertKey: first.crt, corev1.TLSPrivateKeyKey: second.key})
		assert.ErrorIs(t, err, errNoKeyPair)
		assert.False(t, wrote)
		assert.Equal(t, string(second.crt), read("tls.crt"))
	})
	t.Run("plain files of another layout are replaced by the links", func(t *testing.T) {
		plain := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(plain, "tls.crt"), []byte("old"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(plain, "tls.key"), []byte("old"), 0o600))
		wrote, err := syncFiles(plain, data(first))
		require.NoError(t, err)
		assert.True(t, wrote)
		got, err := os.ReadFile(filepath.Join(plain, "tls.crt"))
		require.NoError(t, err)
		assert.Equal(t, string(first.crt), string(got))
		link, err := os.Readlink(filepath.Join(plain, "tls.key"))
		require.NoError(t, err)
		assert.Equal(t, filepath.Join("..data", "tls.key"), link)
	})
	t.Run("a Secret without data writes nothing", func(t *testing.T) {
		_, err := syncFiles(dir, nil)
		assert.ErrorIs(t, err, errNoKeyPair)
	})
}
