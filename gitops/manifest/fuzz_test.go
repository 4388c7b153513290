package manifest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

// Seeds shared by the fuzz targets.
const (
	fuzzConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata:\n  LOG_LEVEL: debug\n"
	fuzzDeploy    = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: team-a\nspec:\n  replicas: 1\n"
	fuzzRole      = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\nrules: []\n"
)

// FuzzUpsert writes a ConfigMap named name with one data value into
// arbitrary content. It must never panic. When it succeeds the result must
// parse, define the object exactly once with exactly its value, keep every
// other document byte-identical, and upserting again must be a no-op. On
// content that parses, with valid UTF-8 input, it must succeed unless the
// object is defined twice; and an existing block document must be edited
// in place, not rewritten. Seeds: testdata/fuzz/FuzzUpsert/.
func FuzzUpsert(f *testing.F) {
	f.Add([]byte(fuzzConfigMap+"---\n"+fuzzDeploy), "app", "info")
	f.Add([]byte{}, "app", "on")
	f.Add([]byte("# c\n---\n"+fuzzConfigMap+"  # foot\n\n...\n"+fuzzRole), "app", "a\nb\n")
	f.Add([]byte("apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: app\r\n  namespace: team-a\r\ndata:\r\n  value: |+\r\n    x\r\n\r\n"), "app", "yes")
	f.Fuzz(func(t *testing.T, content []byte, name, value string) {
		obj := fuzzObject(name, map[string]any{"value": value})
		checkUpsert(t, content, obj, name != "" && utf8.ValidString(name) && utf8.ValidString(value))
	})
}

// FuzzObjectUpsert writes an arbitrary object (given as YAML) into
// arbitrary content, with the checks of FuzzUpsert. The golden corpus
// (testdata/golden/upsert-*) seeds it with realistic files and edits.
func FuzzObjectUpsert(f *testing.F) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "upsert-*"))
	require.NoError(f, err)
	for _, dir := range dirs {
		input, errIn := os.ReadFile(filepath.Join(dir, "input.yaml"))
		object, errObj := os.ReadFile(filepath.Join(dir, "object.yaml"))
		if errIn == nil && errObj == nil {
			f.Add(input, object)
			f.Add([]byte{}, object) // a new file: newFile's lighter read-back, checked by the full parse
		}
	}
	f.Fuzz(func(t *testing.T, content, object []byte) {
		obj, ok := parseFuzzObject(object)
		if !ok {
			return
		}
		aimAtFirstDocument(content, obj)
		checkUpsert(t, content, obj, true)
	})
}

// aimAtFirstDocument gives obj the identity of the first object of
// content, when it has one, so that most fuzzed objects edit a document
// instead of being appended.
func aimAtFirstDocument(content []byte, obj *unstructured.Unstructured) {
	f, err := parseFile(content)
	if err != nil {
		return
	}
	for _, d := range f.docs {
		if d.info.Empty {
			continue
		}
		object, _ := d.value.(map[string]any)
		metadata, _ := object["metadata"].(map[string]any)
		apiVersion, _ := object["apiVersion"].(string)
		namespace, _ := metadata["namespace"].(string)
		obj.SetAPIVersion(apiVersion)
		obj.SetKind(d.info.Identity.Kind)
		obj.SetName(d.info.Identity.Name)
		obj.SetNamespace(namespace)
		return
	}
}

// parseFuzzObject reads an object the way the watcher hands it over
// (decoded from JSON), or reports that the bytes are not a valid object.
func parseFuzzObject(object []byte) (*unstructured.Unstructured, bool) {
	jsonBytes, err := sigsyaml.YAMLToJSON(object)
	if err != nil {
		return nil, false
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(jsonBytes); err != nil || checkObject(obj) != nil {
		return nil, false
	}
	return obj, true
}

// fuzzObject is the ConfigMap team-a/<name> with the given data.
func fuzzObject(name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": "team-a"},
		"data":       data,
	}}
}

// checkUpsert runs Upsert and checks the properties FuzzUpsert lists.
// validInput says whether obj is one Upsert must accept.
func checkUpsert(t *testing.T, content []byte, obj *unstructured.Unstructured, validInput bool) {
	out, changed, err := Upsert(content, obj)
	before, parseErr := parseFile(content)
	if err != nil {
		assert.True(t, errors.Is(err, ErrInvalidObject) || errors.Is(err, ErrUnparseable) || errors.Is(err, ErrUnsupportedDocument) ||
			errors.Is(err, ErrDuplicateIdentity) || errors.Is(err, ErrEditVerification),
			"unexpected error kind: %v", err)
		if parseErr == nil && validInput {
			assert.ErrorIs(t, err, ErrDuplicateIdentity, "valid content must accept the object")
		}
		return
	}
	require.NoError(t, parseErr)
	id := IdentityOf(obj)
	after, err := parseFile(out)
	require.NoError(t, err, "the result must parse:\n%s", out)
	k, err := after.find(id)
	require.NoError(t, err, "the result must define the object once:\n%s", out)
	require.GreaterOrEqual(t, k, 0, "the result must define the object:\n%s", out)
	want, err := objectValue(obj)
	require.NoError(t, err)
	assert.True(t, equalValues(want, after.docs[k].value), "the document must read as the object:\n%s", out)
	assertOthersByteIdentical(t, before, after, id)
	assertEditWithin(t, before, after, id)
	if !changed {
		assert.Equal(t, content, out, "an unchanged upsert must return the content as is")
	}
	edited, err := UpsertIndexed(content, obj, Style{})
	require.NoError(t, err)
	if changed {
		docs, err := Parse(out)
		require.NoError(t, err)
		assert.Equal(t, docs, edited.Docs, "the documents read back are those Parse reads:\n%s", out)
	}
	again, changedAgain, err := Upsert(out, obj)
	require.NoError(t, err)
	assert.False(t, changedAgain, "a second upsert must be a no-op:\n%s", out)
	assert.Equal(t, out, again)
	assertEditedInPlace(t, before, obj)
}

// assertOthersByteIdentical checks that every document of before other
// than id is in after with the same text, in the same order.
func assertOthersByteIdentical(t *testing.T, before, after *file, id Identity) {
	t.Helper()
	var kept, got [][]byte
	for _, d := range before.docs {
		if !d.info.Empty && d.info.Identity != id {
			kept = append(kept, before.body(d))
		}
	}
	for _, d := range after.docs {
		if !d.info.Empty && d.info.Identity != id {
			got = append(got, after.body(d))
		}
	}
	assert.Equal(t, kept, got, "the other documents must stay byte-identical")
}

// assertEditWithin checks that an edit of id's document left the text
// before and after that document's segment as it was.
func assertEditWithin(t *testing.T, before, after *file, id Identity) {
	t.Helper()
	i, err := before.find(id)
	if err != nil || i < 0 {
		return
	}
	seg := before.segments[before.docs[i].segment]
	assert.True(t, bytes.HasPrefix(after.content, before.content[:seg.sepStart]), "the text before the edited document must stay")
	assert.True(t, bytes.HasSuffix(after.content, before.content[seg.end:]), "the text after the edited document must stay")
}

// body returns the text of a document from its first content line to the
// end of its last, without the line break (which appending a document to a
// file that lacks a final one adds).
func (f *file) body(d document) []byte {
	seg := f.segments[d.segment]
	return bytes.TrimRight(f.content[seg.bodyStart:seg.bodyEnd], "\r\n")
}

// assertEditedInPlace checks that an existing document the editor can
// handle (a block mapping, not starting on its "---" line, with only LF or
// CRLF line breaks) was edited in place: the in-place edit reads back as
// obj instead of needing the whole-document fallback.
func assertEditedInPlace(t *testing.T, before *file, obj *unstructured.Unstructured) {
	t.Helper()
	i, err := before.find(IdentityOf(obj))
	if err != nil || i < 0 {
		return
	}
	seg := before.segments[before.docs[i].segment]
	if seg.inline || hasForeignLineBreak(before.content) {
		return
	}
	want, err := objectValue(obj)
	require.NoError(t, err)
	if equalValues(before.docs[i].value, want) {
		return
	}
	var outs [][]byte
	for _, quoteMultiline := range []bool{false, true} {
		more, err := editDocument(before, seg, before.docs[i].value, want, Style{}, lineEnding(before.content), quoteMultiline)
		if errors.Is(err, errNotBlockMapping) || errors.Is(err, errExplicitKey) || errors.Is(err, errUnterminatedScalar) {
			return
		}
		require.NoError(t, err, "the document must be editable in place:\n%s", before.content)
		outs = append(outs, more...)
	}
	for _, out := range outs {
		if _, err = verifyEdit(out, before, IdentityOf(obj), want); err == nil {
			return
		}
	}
	require.NoError(t, err, "the in-place edit must read back as the object:\n%s\n---- became ----\n%s", before.content, outs[0])
}

// FuzzRemove removes each object of arbitrary content in turn. It must
// never panic; on content that parses (without duplicates) it must succeed,
// and the result must parse and hold every other object, byte-identical
// and in the same order.
func FuzzRemove(f *testing.F) {
	f.Add([]byte(fuzzConfigMap + "---\n" + fuzzDeploy))
	f.Add([]byte("# header\n---\n" + fuzzConfigMap + "...\n" + fuzzDeploy + "---\n"))
	f.Add([]byte(fuzzRole + "...\n" + fuzzConfigMap + "...\n# tail\n"))
	f.Add([]byte(fuzzRole + "---\n" + fuzzConfigMap + "...\n%YAML 1.1\n---\n" + fuzzDeploy))
	f.Add([]byte(fuzzRole + "\n# the config\n---\n" + fuzzConfigMap + "# debug: true\n\n# the deployment\n---\n" + fuzzDeploy))
	f.Add([]byte("# header\n%YAML 1.1\n---\n" + fuzzConfigMap + "...\n%YAML 1.1\n---\n" + fuzzRole + "\n  # indented\n\n# next\n---\n" + fuzzDeploy))
	f.Add([]byte(fuzzRole + "---\nkind: ConfigMap\napiVersion: v1\nmetadata:\n  name: s\ndata:\n  run.sh: |\n    echo\n\n    # part of it\n---\n" + fuzzDeploy))
	f.Fuzz(func(t *testing.T, content []byte) {
		before, err := parseFile(content)
		if err != nil {
			return
		}
		var ids []Identity
		for _, d := range before.docs {
			if !d.info.Empty {
				ids = append(ids, d.info.Identity)
			}
		}
		for n := range ids {
			if !removesOne(t, content, before, ids, n) {
				return
			}
		}
	})
}

// removesOne removes ids[n] from content and checks the result (see
// FuzzRemove). It returns false when the file defines an object twice.
func removesOne(t *testing.T, content []byte, before *file, ids []Identity, n int) bool {
	t.Helper()
	out, empty, err := Remove(content, ids[n])
	if errors.Is(err, ErrDuplicateIdentity) {
		return false
	}
	require.NoError(t, err, "removing %s from valid content must succeed:\n%s", ids[n], content)
	after, err := parseFile(out)
	require.NoError(t, err)
	rest := []Identity{}
	for _, d := range after.docs {
		if !d.info.Empty {
			rest = append(rest, d.info.Identity)
		}
	}
	assert.Equal(t, append(slices.Clone(ids[:n]), ids[n+1:]...), rest)
	assert.Equal(t, len(rest) == 0, empty)
	assertOthersByteIdentical(t, before, after, ids[n])
	return true
}
