package manifest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"go.yaml.in/yaml/v3"
)

// FuzzSequenceEntryFilter checks the shortcut of DetectStyle: a file hasSequenceEntry says
// no to gets no vote from the parse it spares either.
func FuzzSequenceEntryFilter(f *testing.F) {
	for _, seed := range []string{
		"items:\n- a\n", "items:\n  - a\n", "---\nk: -1\n", "a: |\n  - not a sequence\n", "- - a\n",
		"items:\r\n  -\r\n    a: 1\r\n", "k: [a, b]\n", "? - a\n: b\n", "a:\n\t- b\n", "a:\n -b\n",
		"a:\r  -", "k: x" + strings.Repeat(" -", 64) + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Add(utf16LE("\ufeffk:\n  - a\n"))
	f.Add(append([]byte{0xFE, 0xFF}, 0, 'k', 0, ':', 0, '\n', 0, '-', 0, ' ', 0, 'a', 0, '\n'))
	f.Fuzz(func(t *testing.T, content []byte) {
		if hasSequenceEntry(content) {
			return
		}
		var votes styleVotes
		dec := yaml.NewDecoder(bytes.NewReader(content))
		for {
			var doc yaml.Node
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) || err != nil {
				break
			}
			votes.count(&doc)
		}
		if _, ok := votes.verdict(); ok {
			t.Fatalf("%q has a block sequence the filter missed", content)
		}
	})
}

// utf16LE encodes s as UTF-16, little-endian, as Windows PowerShell 5 writes files.
func utf16LE(s string) []byte {
	var out []byte
	for _, u := range utf16.Encode([]rune(s)) {
		out = binary.LittleEndian.AppendUint16(out, u)
	}
	return out
}

func TestSequenceEntryFilter(t *testing.T) {
	t.Run("skips a ConfigMap, which has no sequence to read a style from", func(t *testing.T) {
		assert.False(t, hasSequenceEntry([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-00042\n  namespace: team-a\ndata:\n  k: -1\n  s: a - b\n")))
	})
	t.Run("reads UTF-16 text, which yaml.v3 decodes", func(t *testing.T) {
		st, ok := DetectStyle(utf16LE("\ufeffk:\n  - a\n"))
		assert.True(t, ok)
		assert.Equal(t, Style{IndentSequences: true}, st)
	})
}
