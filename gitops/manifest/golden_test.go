package manifest_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// goldenOp is the operation a golden case runs on testdata/golden/<dir>.
type goldenOp int

const (
	opEncode goldenOp = iota // Encode(object.yaml)
	opUpsert                 // Upsert(input.yaml, object.yaml)
	opRemove                 // Remove(input.yaml, identity of object.yaml)
)

// TestGolden runs each case on testdata/golden/<dir>/{input.yaml,
// object.yaml} and compares the result with want.yaml. Run with -update to
// rewrite want.yaml after an intended change, then review the diff.
func TestGolden(t *testing.T) {
	tests := []struct {
		name        string
		dir         string
		op          goldenOp
		wantChanged bool // Upsert
		wantEmpty   bool // Remove
	}{
		{name: "writes a new ConfigMap with quoted ambiguous strings and a literal block", dir: "encode-configmap", op: opEncode},
		{name: "writes a new Deployment with its containers list at the key's indentation", dir: "encode-deployment", op: opEncode},
		{name: "orders the keys of a scrambled object the way people write them", dir: "encode-scrambled", op: opEncode},
		{name: "upsert into a multi-document file keeps the other documents byte-identical", dir: "upsert-multi-doc", op: opUpsert, wantChanged: true},
		{name: "upsert of an unchanged object returns the file untouched", dir: "upsert-noop", op: opUpsert, wantChanged: false},
		{name: "upsert of a new object appends it after a separator", dir: "upsert-append", op: opUpsert, wantChanged: true},
		{name: "upsert keeps the comments before the first document", dir: "upsert-leading-comments", op: opUpsert, wantChanged: true},
		{name: "upsert reuses a trailing bare separator instead of leaving an empty document", dir: "upsert-trailing-separator", op: opUpsert, wantChanged: true},
		{name: "upsert keeps directives, end markers and comments between documents", dir: "upsert-end-markers", op: opUpsert, wantChanged: true},
		{name: "upsert into an empty file writes just the document", dir: "upsert-empty-file", op: opUpsert, wantChanged: true},
		{name: "an edited image keeps the blank lines between sections and list items", dir: "upsert-blank-lines-kept", op: opUpsert, wantChanged: true},
		{name: "a new container is separated by a blank line like its siblings", dir: "upsert-blank-lines-new-list-item", op: opUpsert, wantChanged: true},
		{name: "literal and folded block scalars stay as written when another key changes", dir: "upsert-block-literal-and-folded-kept", op: opUpsert, wantChanged: true},
		{name: "clip, keep and strip chomping indicators stay as written", dir: "upsert-block-chomping-indicators-kept", op: opUpsert, wantChanged: true},
		{name: "an edited literal block stays a literal block at its indentation", dir: "upsert-block-literal-edited-stays-literal", op: opUpsert, wantChanged: true},
		{name: "a block scalar with an indentation indicator stays as written", dir: "upsert-block-indentation-indicator-kept", op: opUpsert, wantChanged: true},
		{name: "a leading separator stays", dir: "upsert-leading-separator-kept", op: opUpsert, wantChanged: true},
		{name: "a directive, the separator and the end marker stay", dir: "upsert-end-marker-kept", op: opUpsert, wantChanged: true},
		{name: "separators with comments stay", dir: "upsert-separator-comment-kept", op: opUpsert, wantChanged: true},
		{name: "a new list in a compact-sequence file is written compact", dir: "upsert-compact-sequences-kept-and-followed", op: opUpsert, wantChanged: true},
		{name: "a new list in an indented-sequence file is written indented", dir: "upsert-indented-sequences-kept-and-followed", op: opUpsert, wantChanged: true},
		{name: "a document appended to an indented-sequence file is written indented", dir: "upsert-indented-sequences-followed-by-appended-document", op: opUpsert, wantChanged: true},
		{name: "head, line and foot comments everywhere stay when values change", dir: "upsert-comments-in-every-position-kept", op: opUpsert, wantChanged: true},
		{name: "the line comment of a changed value stays", dir: "upsert-line-comment-kept-on-changed-value", op: opUpsert, wantChanged: true},
		{name: "the comments before the first document stay", dir: "upsert-comments-before-first-document-kept", op: opUpsert, wantChanged: true},
		{name: "comments between documents and quoting in a flow mapping document stay", dir: "upsert-comments-between-documents-kept", op: opUpsert, wantChanged: true},
		{name: "editing the first document keeps the others byte-identical", dir: "upsert-multi-document-first-edited-others-byte-identical", op: opUpsert, wantChanged: true},
		{name: "editing the last document keeps the missing final newline missing", dir: "upsert-multi-document-last-edited-without-final-newline", op: opUpsert, wantChanged: true},
		{name: "CRLF line endings stay, also on new lines", dir: "upsert-crlf-line-endings-kept", op: opUpsert, wantChanged: true},
		{name: "a byte order mark stays", dir: "upsert-byte-order-mark-kept", op: opUpsert, wantChanged: true},
		{name: "containers reordered by the object move with their comments", dir: "upsert-list-reordered-by-merge-key-keeps-item-comments", op: opUpsert, wantChanged: true},
		{name: "a container that moved and changed is edited where it lands", dir: "upsert-list-item-moved-and-edited-by-merge-key", op: opUpsert, wantChanged: true},
		{name: "a removed container leaves with its comment", dir: "upsert-list-item-removed-with-its-comment", op: opUpsert, wantChanged: true},
		{name: "a new container is inserted where the object has it", dir: "upsert-list-item-added-where-the-object-has-it", op: opUpsert, wantChanged: true},
		{name: "container ports are matched by containerPort", dir: "upsert-list-item-matched-by-container-port", op: opUpsert, wantChanged: true},
		{name: "a removed env var leaves with its head and line comments", dir: "upsert-env-item-removed-with-head-and-line-comments", op: opUpsert, wantChanged: true},
		{name: "volume mounts sharing a name are matched by mountPath", dir: "upsert-volume-mounts-matched-by-mount-path", op: opUpsert, wantChanged: true},
		{name: "a changed item of a list without merge key is edited in place", dir: "upsert-list-without-merge-key-changed-item-edited", op: opUpsert, wantChanged: true},
		{name: "a removed item of a list of strings goes alone", dir: "upsert-list-of-scalars-item-removed", op: opUpsert, wantChanged: true},
		{name: "a new item of a list of strings is inserted in place", dir: "upsert-list-of-scalars-item-inserted", op: opUpsert, wantChanged: true},
		{name: "a removed key leaves with its head and line comments", dir: "upsert-key-removed-with-its-comments", op: opUpsert, wantChanged: true},
		{name: "a key removed from blank-separated keys leaves one separation", dir: "upsert-key-removed-from-blank-separated-section", op: opUpsert, wantChanged: true},
		{name: "a key added to blank-separated keys is separated the same way", dir: "upsert-key-added-to-blank-separated-section", op: opUpsert, wantChanged: true},
		{name: "a removed nested key leaves with its foot comment", dir: "upsert-nested-key-removed-with-its-foot-comment", op: opUpsert, wantChanged: true},
		{name: "a new label goes after its siblings", dir: "upsert-key-added-after-its-siblings", op: opUpsert, wantChanged: true},
		{name: "new labels go between the namespace and the annotations", dir: "upsert-metadata-key-added-in-the-order-people-write", op: opUpsert, wantChanged: true},
		{name: "new top-level keys go where people write them", dir: "upsert-top-level-key-added-in-the-order-people-write", op: opUpsert, wantChanged: true},
		{name: "an object equal to a hand-formatted document writes nothing", dir: "upsert-noop-returns-file-untouched", op: opUpsert, wantChanged: false},
		{name: "numbers written in hex or with exponents are equal to the object", dir: "upsert-noop-numbers-written-differently", op: opUpsert, wantChanged: false},
		{name: "changed values keep their double, single or no quotes", dir: "upsert-quoting-of-changed-values-kept", op: opUpsert, wantChanged: true},
		{name: "changed flow collections stay flow when they fit on a line", dir: "upsert-flow-collections-changed-stay-flow", op: opUpsert, wantChanged: true},
		{name: "a string that becomes a mapping keeps the key's comment", dir: "upsert-scalar-becomes-mapping", op: opUpsert, wantChanged: true},
		{name: "a mapping emptied by the object becomes {}", dir: "upsert-mapping-emptied-becomes-empty-flow", op: opUpsert, wantChanged: true},
		{name: "empty values are filled in, keeping their comment", dir: "upsert-empty-value-filled-in", op: opUpsert, wantChanged: true},
		{name: "a value written on the line after its key is replaced there", dir: "upsert-value-on-the-next-line-edited", op: opUpsert, wantChanged: true},
		{name: "a key added to a container lines up with its siblings", dir: "upsert-key-added-to-list-item-mapping", op: opUpsert, wantChanged: true},
		{name: "removing the first key of a list item keeps the item well formed", dir: "upsert-first-key-of-list-item-removed", op: opUpsert, wantChanged: true},
		{name: "the comments of the next key stay when a list item's first key is removed, after the dash", dir: "upsert-first-key-of-list-item-removed-keeps-the-next-keys-comment", op: opUpsert, wantChanged: true},
		{name: "sequences nested in sequence items are edited item by item", dir: "upsert-nested-sequences-in-sequence-items", op: opUpsert, wantChanged: true},
		{name: "a new multi-line string is written as a literal block", dir: "upsert-multi-line-string-added-as-literal-block", op: opUpsert, wantChanged: true},
		{name: "new siblings in a 4-space indented file line up with the existing keys", dir: "upsert-four-space-indentation-kept-for-new-siblings", op: opUpsert, wantChanged: true},
		{name: "the comment after a key stays when its value is replaced", dir: "upsert-comment-after-key-kept-when-value-replaced", op: opUpsert, wantChanged: true},
		{name: "a plain yes that should be the string yes gets quoted", dir: "upsert-yaml-1-1-boolean-string-quoted", op: opUpsert, wantChanged: true},
		{name: "a new key goes before the comment that ends the document", dir: "upsert-trailing-comment-after-last-key-kept", op: opUpsert, wantChanged: true},
		{name: "multi-line plain and quoted scalars are replaced whole and their neighbours kept", dir: "upsert-multi-line-scalars-edited-and-kept", op: opUpsert, wantChanged: true},
		{name: "comments at odd indentations stay with the entries they follow", dir: "upsert-odd-comment-placement-kept", op: opUpsert, wantChanged: true},
		{name: "a section comment set apart by blank lines above a removed key stays, a stray comment rather than a lost one", dir: "upsert-section-comment-above-removed-key-kept", op: opUpsert, wantChanged: true},
		{name: "empty values, tildes and empty list items are filled in or kept", dir: "upsert-empty-values-and-nulls-edited", op: opUpsert, wantChanged: true},
		{name: "flow collections spanning lines are rewritten only where they changed", dir: "upsert-multi-line-flow-collections-edited", op: opUpsert, wantChanged: true},
		{name: "values after keys with multi-byte characters are found by column", dir: "upsert-values-after-multibyte-keys-edited", op: opUpsert, wantChanged: true},
		{name: "a CRLF file gets CRLF in an edited block scalar and list", dir: "upsert-crlf-block-scalar-and-list-edited", op: opUpsert, wantChanged: true},
		{name: "a file with a byte order mark and no final newline keeps both", dir: "upsert-bom-without-final-newline-edited", op: opUpsert, wantChanged: true},
		{name: "sequences indented by four spaces are edited at their indentation", dir: "upsert-indented-nested-sequences-edited", op: opUpsert, wantChanged: true},
		{name: "block scalars with indicators and keep chomping are replaced safely", dir: "upsert-block-scalars-with-indicators-edited", op: opUpsert, wantChanged: true},
		{name: "a block scalar added before trailing comments does not swallow them", dir: "upsert-comments-after-a-block-scalar-at-the-end-kept", op: opUpsert, wantChanged: true},
		{name: "quoted keys stay quoted and a key that reads as a boolean is matched", dir: "upsert-quoted-keys-kept-as-written", op: opUpsert, wantChanged: true},
		{name: "remove of the middle document keeps its neighbours byte-identical", dir: "remove-middle", op: opRemove},
		{name: "remove of the last document drops its separator", dir: "remove-last", op: opRemove},
		{name: "remove of the first document keeps the file's header comment", dir: "remove-first", op: opRemove},
		{name: "remove of the only document leaves an empty file", dir: "remove-only", op: opRemove, wantEmpty: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "golden", tt.dir)
			obj := readObject(t, filepath.Join(dir, "object.yaml"))
			var got []byte
			var err error
			switch tt.op {
			case opEncode:
				got, err = manifest.Encode(obj)
				require.NoError(t, err)
			case opUpsert:
				input := readFile(t, filepath.Join(dir, "input.yaml"))
				var changed bool
				got, changed, err = manifest.Upsert(input, obj)
				require.NoError(t, err)
				assert.Equal(t, tt.wantChanged, changed, "changed")
				assertOthersKept(t, input, got, manifest.IdentityOf(obj))
				assertContains(t, got, obj)
			case opRemove:
				input := readFile(t, filepath.Join(dir, "input.yaml"))
				var empty bool
				got, empty, err = manifest.Remove(input, manifest.IdentityOf(obj))
				require.NoError(t, err)
				assert.Equal(t, tt.wantEmpty, empty, "empty")
				assertOthersKept(t, input, got, manifest.IdentityOf(obj))
			}
			compareGolden(t, filepath.Join(dir, "want.yaml"), got)
		})
	}
}

// readObject loads a YAML object the way the watcher would hand it over:
// decoded from JSON, with integers as int64.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	jsonBytes, err := yaml.YAMLToJSON(readFile(t, path))
	require.NoError(t, err)
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON(jsonBytes))
	return obj
}

// readFile reads a test input.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	content, err := os.ReadFile(path)
	require.NoError(t, err)
	return content
}

// compareGolden compares got with the golden file, rewriting it first under
// -update.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	assert.Equal(t, string(readFile(t, path)), string(got))
}

// assertOthersKept checks that every document of input other than the one
// with identity skip appears byte-for-byte in output.
func assertOthersKept(t *testing.T, input, output []byte, skip manifest.Identity) {
	t.Helper()
	for _, doc := range documentsOf(t, input) {
		if doc.id == skip {
			continue
		}
		assert.Contains(t, string(output), doc.text, "document %s must be kept byte-identical", doc.id)
	}
}

// assertContains checks that content parses and holds obj.
func assertContains(t *testing.T, content []byte, obj *unstructured.Unstructured) {
	t.Helper()
	infos, err := manifest.Parse(content)
	require.NoError(t, err)
	found := 0
	for _, info := range infos {
		if info.Identity == manifest.IdentityOf(obj) {
			found++
		}
	}
	assert.Equal(t, 1, found, "%s must be defined exactly once", manifest.IdentityOf(obj))
	again, changed, err := manifest.Upsert(content, obj)
	require.NoError(t, err)
	assert.False(t, changed, "upserting the same object again must be a no-op")
	assert.Equal(t, string(content), string(again))
}

// textDoc is one document's identity and its text from the first content
// line to the last (independent of the package's own splitter).
type textDoc struct {
	id   manifest.Identity
	text string
}

// documentsOf returns the non-empty documents of a file by splitting on
// "---" lines, as a reference the package's splitter is checked against.
func documentsOf(t *testing.T, content []byte) []textDoc {
	t.Helper()
	infos, err := manifest.Parse(content)
	require.NoError(t, err)
	var docs []textDoc
	var texts []string
	current := ""
	for _, l := range splitKeepingNewlines(string(content)) {
		if l == "---\n" || l == "---" {
			texts = append(texts, current)
			current = ""
			continue
		}
		current += l
	}
	texts = append(texts, current)
	if len(texts) > len(infos) {
		texts = texts[len(texts)-len(infos):] // drop a comment-only preamble
	}
	for i, info := range infos {
		if !info.Empty && i < len(texts) {
			docs = append(docs, textDoc{id: info.Identity, text: texts[i]})
		}
	}
	return docs
}

// splitKeepingNewlines splits s into lines that keep their "\n".
func splitKeepingNewlines(s string) []string {
	var lines []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		if i < len(s) {
			i++
		}
		lines = append(lines, s[:i])
		s = s[i:]
	}
	return lines
}
