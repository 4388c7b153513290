package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewFileReadsAsTheFullCheckDoes holds newFile to what the full read-back (encodeValue,
// then verifyEdit) gives for the same object: the same bytes and the same documents, for
// strings each YAML reader resolves its own way.
func TestNewFileReadsAsTheFullCheckDoes(t *testing.T) {
	values := map[string]string{
		"a YAML 1.1 boolean word stays a string":  "yes",
		"an on/off word stays a string":           "off",
		"a YAML 1.1 octal stays a string":         "0755",
		"a sexagesimal number stays a string":     "1:20",
		"an exponent stays a string":              "1e3",
		"a null word stays a string":              "~",
		"an empty string stays a string":          "",
		"a document marker stays inside its file": "---",
		"an end marker stays inside its file":     "...",
		"a multi-line string with a marker line":  "a\n---\nb\n",
		"a comment sign stays a string":           "# not a comment",
		"a mapping-like string stays a string":    "key: value",
		"leading and trailing spaces are kept":    "  padded  ",
		"a next-line character is kept":           "a\u0085b",
	}
	for name, value := range values {
		t.Run(name, func(t *testing.T) {
			obj := fuzzObject("app", map[string]any{"value": value, value: "as a key"})
			want, err := objectValue(obj)
			require.NoError(t, err)
			id := IdentityOf(obj)
			got, err := newFile(id, want, Style{})
			require.NoError(t, err)
			printed, err := encodeValue(id, want, Style{})
			require.NoError(t, err)
			assert.Equal(t, string(printed), string(got.content), "the bytes the full way writes")
			full, err := verifyEdit(got.content, &file{}, id, want)
			require.NoError(t, err, "the full read-back accepts it:\n%s", got.content)
			assert.Equal(t, full.infos(), got.infos(), "the documents the full read-back gives")
		})
	}
}

func TestANewFileIsWrittenInTheFoldersSequenceStyle(t *testing.T) {
	obj := fuzzObject("app", nil)
	obj.Object["kind"], obj.Object["apiVersion"] = "Role", "rbac.authorization.k8s.io/v1"
	obj.Object["rules"] = []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list"}}}
	for _, style := range []Style{{}, {IndentSequences: true}} {
		edited, err := UpsertIndexed(nil, obj, style)
		require.NoError(t, err)
		want, err := objectValue(obj)
		require.NoError(t, err)
		printed, err := encodeValue(IdentityOf(obj), want, style)
		require.NoError(t, err)
		assert.Equal(t, string(printed), string(edited.Content), "the bytes the full way writes, indented %v", style.IndentSequences)
		docs, err := Parse(edited.Content)
		require.NoError(t, err)
		assert.Equal(t, docs, edited.Docs, "the documents Parse reads")
	}
}
