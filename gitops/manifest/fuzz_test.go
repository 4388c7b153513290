package manifest_test

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// FuzzUpsert writes a ConfigMap named name with one data value into
// arbitrary content. It must never panic; when it succeeds the result must
// parse, define the object exactly once, and upserting it again must be a
// no-op. On content that parses, with valid UTF-8 input, it must succeed
// unless the object is defined twice. Seeds: testdata/fuzz/FuzzUpsert/.
func FuzzUpsert(f *testing.F) {
	f.Add([]byte(configMapApp+"---\n"+deploymentAPI), "app", "info")
	f.Fuzz(func(t *testing.T, content []byte, name, value string) {
		obj := appObject(map[string]any{"value": value})
		obj.SetName(name)

		out, changed, err := manifest.Upsert(content, obj)
		if err != nil {
			assert.True(t, errors.Is(err, manifest.ErrInvalidObject) || errors.Is(err, manifest.ErrUnparseable) ||
				errors.Is(err, manifest.ErrDuplicateIdentity) || errors.Is(err, manifest.ErrEditVerification),
				"unexpected error kind: %v", err)
			_, parseErr := manifest.Parse(content)
			if parseErr == nil && name != "" && utf8.ValidString(name) && utf8.ValidString(value) {
				assert.ErrorIs(t, err, manifest.ErrDuplicateIdentity, "valid content must accept the object")
			}
			return
		}

		infos, err := manifest.Parse(out)
		require.NoError(t, err, "the result must parse:\n%s", out)
		found := 0
		for _, info := range infos {
			if info.Identity == manifest.IdentityOf(obj) {
				found++
			}
		}
		assert.Equal(t, 1, found, "the result must define the object once:\n%s", out)

		again, changedAgain, err := manifest.Upsert(out, obj)
		require.NoError(t, err)
		assert.False(t, changedAgain, "a second upsert must be a no-op:\n%s", out)
		assert.Equal(t, out, again)
		if !changed {
			assert.Equal(t, content, out, "an unchanged upsert must return the content as is")
		}
	})
}

// FuzzRemove removes the first object of arbitrary content. It must never
// panic; on content that parses (without duplicates) it must succeed, and
// the result must parse and hold every other object in the same order.
func FuzzRemove(f *testing.F) {
	f.Add([]byte(configMapApp + "---\n" + deploymentAPI))
	f.Add([]byte("# header\n---\n" + configMapApp + "...\n" + deploymentAPI + "---\n"))
	f.Add([]byte(clusterRoleAdmin + "...\n" + configMapApp + "...\n# tail\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		before, err := manifest.Parse(content)
		if err != nil {
			return
		}
		var ids []manifest.Identity
		for _, d := range before {
			if !d.Empty {
				ids = append(ids, d.Identity)
			}
		}
		if len(ids) == 0 {
			return
		}
		out, empty, err := manifest.Remove(content, ids[0])
		if errors.Is(err, manifest.ErrDuplicateIdentity) {
			return
		}
		require.NoError(t, err, "removing from valid content must succeed:\n%s", content)
		after, err := manifest.Parse(out)
		require.NoError(t, err)
		rest := []manifest.Identity{}
		for _, d := range after {
			if !d.Empty {
				rest = append(rest, d.Identity)
			}
		}
		assert.Equal(t, ids[1:], rest)
		assert.Equal(t, len(rest) == 0, empty)
	})
}
