package manifest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

const compactSequences = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    args:\n    - x\n"

const indentedSequences = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: a\n      args:\n        - x\n"

func TestDetectStyle(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    manifest.Style
		wantOK  bool
	}{
		{name: "reads sequences at their key's column as compact", content: compactSequences, want: manifest.Style{}, wantOK: true},
		{name: "reads sequences indented under their key as indented", content: indentedSequences, want: manifest.Style{IndentSequences: true}, wantOK: true},
		{name: "says nothing about a file without block sequences", content: configMapApp, wantOK: false},
		{name: "ignores flow sequences", content: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  args: [a, b]\n", wantOK: false},
		{name: "looks at every document", content: configMapApp + "---\n" + indentedSequences, want: manifest.Style{IndentSequences: true}, wantOK: true},
		{name: "lets the more frequent style win", content: indentedSequences + "---\n" + compactSequences + "---\n" + compactSequences, want: manifest.Style{}, wantOK: true},
		{name: "lets the first style win a tie", content: indentedSequences + "---\n" + compactSequences, want: manifest.Style{IndentSequences: true}, wantOK: true},
		{name: "says nothing about YAML that does not parse", content: "a: [", wantOK: false},
		{name: "says nothing about a new, empty file", content: "", wantOK: false},
		{name: "says nothing about a file whose only dashes start document markers and scalars", content: "---\nkind: ConfigMap\ndata:\n  k: -1\n  s: a-b\n---\n", wantOK: false},
		{name: "reads an entry whose item starts on the next line", content: "spec:\n  items:\n    -\n      name: a\n", want: manifest.Style{IndentSequences: true}, wantOK: true},
		{name: "reads an entry in a file with CRLF line ends", content: "items:\r\n  -\r\n    a: 1\r\n", want: manifest.Style{IndentSequences: true}, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := manifest.DetectStyle([]byte(tt.content))
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// podObject is a Pod with one container and arguments.
func podObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "a", "args": []any{"x"}}}},
	}}
}

func TestEncodeStyled(t *testing.T) {
	compact, err := manifest.EncodeStyled(podObject(), manifest.Style{})
	require.NoError(t, err)
	assert.Equal(t, compactSequences, string(compact))
	indented, err := manifest.EncodeStyled(podObject(), manifest.Style{IndentSequences: true})
	require.NoError(t, err)
	assert.Equal(t, indentedSequences, string(indented))
	plain, err := manifest.Encode(podObject())
	require.NoError(t, err)
	assert.Equal(t, string(compact), string(plain), "Encode writes the default style")
}

func TestUpsertStyled(t *testing.T) {
	t.Run("writes a new file in the given style", func(t *testing.T) {
		out, changed, err := manifest.UpsertStyled(nil, podObject(), manifest.Style{IndentSequences: true})
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Equal(t, indentedSequences, string(out))
	})
	t.Run("prefers the style the file already has", func(t *testing.T) {
		out, _, err := manifest.UpsertStyled([]byte(compactSequences), appObject(map[string]any{"list": []any{"a"}}), manifest.Style{IndentSequences: true})
		require.NoError(t, err)
		assert.Contains(t, string(out), "data:\n  list:\n  - a\n")
	})
	t.Run("uses the given style when the file has none", func(t *testing.T) {
		content := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\n"
		out, _, err := manifest.UpsertStyled([]byte(content), appObject(map[string]any{"list": []any{"a"}}), manifest.Style{IndentSequences: true})
		require.NoError(t, err)
		assert.Equal(t, content+"data:\n  list:\n    - a\n", string(out))
	})
}
