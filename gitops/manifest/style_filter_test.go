package manifest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzSequenceEntryFilter checks the shortcut of DetectStyle: a file hasSequenceEntry says
// no to gets no vote from the parse it spares either.
func FuzzSequenceEntryFilter(f *testing.F) {
	for _, seed := range []string{
		"items:\n- a\n", "items:\n  - a\n", "---\nk: -1\n", "a: |\n  - not a sequence\n", "- - a\n",
		"items:\r\n  -\r\n    a: 1\r\n", "k: [a, b]\n", "? - a\n: b\n", "a:\n\t- b\n", "a:\n -b\n",
	} {
		f.Add([]byte(seed))
	}
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
