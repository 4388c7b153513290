package manifest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

func TestStringNodeQuotesLikeYAMLv3(t *testing.T) {
	for _, s := range append(awkwardStrings(), "y", "No", "ON", "1:30", "-1:30:00.5", "1_000", "0x1F", ".inf", "~", "2024-01-02",
		"<<", "=", "*x", "&x", "!x", "|", ">", "? x", "a:b", "[x]", "{x}", "x,y", "日本", "tab\there", "😀", "") {
		got, err := printStyled(stringNode(s), Style{})
		require.NoError(t, err)
		if blockUnsafe(s) || s == "<<" {
			assert.Equal(t, byte('"'), got[0], "%q must be double-quoted", s)
		} else {
			var node yaml.Node
			require.NoError(t, node.Encode(s))
			want, err := printStyled(&node, Style{})
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "%q must print as yaml.v3 prints it", s)
		}
		jsonBytes, err := sigsyaml.YAMLToJSON(append([]byte("k: "), got...))
		require.NoError(t, err)
		value, err := decodeJSON(jsonBytes)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"k": s}, value, "%q must read back as itself", s)
	}
}

func TestIsSexagesimal(t *testing.T) {
	for s, want := range map[string]bool{"1:30": true, "-1:30": true, "+190:20:30.15": true, "1_0:5": true, "1:60": false, "1:7": true,
		"1:75": false, ":30": false, "1:": false, "1": false, "a:1": false, "1:30x": false, "_1:30": false} {
		assert.Equal(t, want, isSexagesimal(s), s)
	}
}

func TestAStringHoldingALineBreakOtherThanLFIsWrittenEscapedAndReadsBackTheSame(t *testing.T) {
	for _, s := range []string{"a\u2028b", "para\u2029", "n\u0085m", "lone\rcr", "crlf\r\nline", "multi\nline\u2028x"} {
		for _, existing := range []string{"", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: b\ndata:\n  d: 'old' # kept\n"} {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "a", "namespace": "b", "annotations": map[string]any{"key" + s: s}},
				"data":     map[string]any{"d": s}}}
			out, _, err := Upsert([]byte(existing), obj)
			require.NoError(t, err, "%q into %q", s, existing)
			assert.NotContains(t, string(out), "\u2028", "written escaped")
			if existing != "" {
				assert.Contains(t, string(out), "# kept", "edited in place, comment kept")
			}
		}
	}
}

func TestOneLineGivesEachReasonOnceOnOneLine(t *testing.T) {
	differs := errors.New("ConfigMap app/app reads back differently")
	err := fmt.Errorf("%w: writing ConfigMap app/app: %w", ErrEditVerification, oneLine{differs, errors.New("other documents changed"), differs})
	assert.Equal(t, "edit failed verification: writing ConfigMap app/app: ConfigMap app/app reads back differently; other documents changed", err.Error())
	assert.ErrorIs(t, err, differs, "each reason is still there for errors.Is")
}
