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
