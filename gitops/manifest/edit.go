package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ErrDuplicateIdentity is returned when the object to edit is defined by
// more than one document of the file: editing either would leave the file
// ambiguous, so the caller must refuse the folder instead.
var ErrDuplicateIdentity = errors.New("object defined more than once")

// ErrEditVerification is returned when an edit, read back, would not give
// the intended objects (the edited one equal to the input, every other one
// unchanged). It guards against splitter or printer bugs: the caller keeps
// the file as it was and reports the error rather than committing damage.
var ErrEditVerification = errors.New("edit failed verification")

// Upsert writes obj into content, a (possibly multi-document) YAML file.
//
// When a document with obj's identity exists, that document is replaced by
// the encoding of obj, keeping every other document, the "---" separators,
// the comments before the document and the comments after it (when that
// cannot change what the file means) byte-identical. Otherwise obj is
// appended after a "---" separator, or returned alone when content is empty.
//
// When the existing document already means obj (same data once parsed,
// whatever the formatting or key order), content is returned unchanged with
// changed=false, so an unchanged object never produces a commit.
//
// Errors wrap ErrInvalidObject (obj cannot be written), ErrUnparseable
// (content is not a set of Kubernetes objects), ErrDuplicateIdentity or
// ErrEditVerification.
func Upsert(content []byte, obj *unstructured.Unstructured) (out []byte, changed bool, err error) {
	return upsert(content, obj, replaceBody)
}

// Remove deletes the document with identity id, and its separator, from
// content, keeping every other document byte-identical and the comments
// before the file's first "---". empty is true when no document defining an
// object remains, so the caller deletes the file. When no document has that
// identity, content is returned unchanged with a nil error.
//
// Errors wrap ErrUnparseable, ErrDuplicateIdentity or ErrEditVerification.
func Remove(content []byte, id Identity) (out []byte, empty bool, err error) {
	before, err := parseFile(content)
	if err != nil {
		return nil, false, err
	}
	i, err := before.find(id)
	if err != nil {
		return nil, false, err
	}
	if i < 0 {
		return content, !before.hasObjects(), nil
	}
	out = cutDocument(before, i)
	after, err := verifyEdit(out, before, id, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%w: removing %s: %w", ErrEditVerification, id, err)
	}
	return out, !after.hasObjects(), nil
}

// rewriteFunc produces the new body of an existing document (see segment)
// from its old body and the object it must now represent.
//
// This is the seam for in-place editing: replaceBody ignores the old body
// and writes a fresh encoding; an editor that keeps key order and comments
// plugs in here without touching splitting, no-op detection or
// verification.
type rewriteFunc func(oldBody []byte, obj *unstructured.Unstructured) ([]byte, error)

// replaceBody is the rewriteFunc that replaces the whole body with Encode.
func replaceBody(_ []byte, obj *unstructured.Unstructured) ([]byte, error) {
	return Encode(obj)
}

// upsert implements Upsert with a pluggable rewrite of existing documents.
func upsert(content []byte, obj *unstructured.Unstructured, rewrite rewriteFunc) ([]byte, bool, error) {
	if err := checkObject(obj); err != nil {
		return nil, false, err
	}
	want, err := objectValue(obj)
	if err != nil {
		return nil, false, err
	}
	id := IdentityOf(obj)
	before, err := parseFile(content)
	if err != nil {
		return nil, false, err
	}
	i, err := before.find(id)
	if err != nil {
		return nil, false, err
	}
	if i >= 0 && equalValues(before.docs[i].value, want) {
		return content, false, nil
	}

	candidates, err := upsertCandidates(before, i, obj, rewrite)
	if err != nil {
		return nil, false, err
	}
	var errs []error
	for _, out := range candidates {
		if _, err := verifyEdit(out, before, id, want); err != nil {
			errs = append(errs, err)
			continue
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%w: writing %s: %w", ErrEditVerification, id, errors.Join(errs...))
}

// upsertCandidates returns the possible new file contents, preferred first:
// for an existing document (index i) the rewrite keeping trailing comments,
// then one dropping them (they may have been block-scalar content); for a
// new document (i < 0) the file with the document appended.
func upsertCandidates(f *file, i int, obj *unstructured.Unstructured, rewrite rewriteFunc) ([][]byte, error) {
	eol := lineEnding(f.content)
	if i < 0 {
		doc, err := Encode(obj)
		if err != nil {
			return nil, err
		}
		return [][]byte{appendDocument(f, withLineEnding(doc, eol), eol)}, nil
	}
	seg := f.segments[f.docs[i].segment]
	body, err := rewrite(f.content[seg.bodyStart:seg.bodyEnd], obj)
	if err != nil {
		return nil, fmt.Errorf("rewriting %s: %w", IdentityOf(obj), err)
	}
	body = withLineEnding(body, eol)
	return [][]byte{
		spliceBody(f.content, seg, body, true, eol),
		spliceBody(f.content, seg, body, false, eol),
	}, nil
}

// spliceBody replaces a segment's body with body. The lead, "---" line and
// head are kept; the tail is kept whole when keepTail is set, otherwise only
// from the "..." marker on.
func spliceBody(content []byte, seg segment, body []byte, keepTail bool, eol string) []byte {
	prefixEnd := seg.bodyStart
	var sep []byte
	if seg.inline {
		// The content started on the "---" line itself; write a plain one.
		prefixEnd = seg.sepStart
		sep = []byte("---" + eol)
	}
	suffixStart := seg.bodyEnd
	if !keepTail {
		suffixStart = seg.end
		if seg.ended() {
			suffixStart = seg.endMarker
		}
	}
	return concat(content[:prefixEnd], sep, body, content[suffixStart:])
}

// appendDocument adds doc as the file's last document. An empty file
// becomes just doc; a trailing bare "---" (with nothing after it but blank
// lines) is reused instead of leaving an empty document before doc.
func appendDocument(f *file, doc []byte, eol string) []byte {
	content := f.content
	if len(bytes.TrimSpace(content)) == 0 {
		return doc
	}
	last := f.segments[len(f.segments)-1]
	if last.hasSep && !last.hasBody && last.start == last.sepStart &&
		len(bytes.TrimSpace(content[last.sepEnd:last.end])) == 0 {
		return concat(withTrailingEOL(content[:last.sepEnd], eol), doc)
	}
	return concat(withTrailingEOL(content, eol), []byte("---"+eol), doc)
}

// cutDocument returns content without the i-th document's segment. The
// comments before the file's first "---" stay (they describe the file), and
// the segment's "..." marker stays when the next document has no "---" and
// relies on it to end the previous one.
func cutDocument(f *file, i int) []byte {
	index := f.docs[i].segment
	seg := f.segments[index]
	from := seg.start
	if i == 0 && seg.hasSep {
		from = seg.sepStart
	}
	to := seg.end
	nextIsBare := index+1 < len(f.segments) && !f.segments[index+1].hasSep
	previousNeedsEnd := i > 0 && !f.segments[f.docs[i-1].segment].ended()
	if nextIsBare && previousNeedsEnd && seg.ended() {
		to = seg.endMarker
	}
	return concat(f.content[:from], f.content[to:])
}

// verifyEdit parses out and checks it against the file it was made from:
// every object other than id is unchanged and in the same order, and id is
// present with value want (or absent when want is nil). It returns the
// parsed result.
func verifyEdit(out []byte, before *file, id Identity, want any) (*file, error) {
	after, err := parseFile(out)
	if err != nil {
		return nil, fmt.Errorf("result does not parse: %w", err)
	}
	i, err := after.find(id)
	if err != nil {
		return nil, err
	}
	switch {
	case want == nil && i >= 0:
		return nil, fmt.Errorf("%s is still present", id)
	case want != nil && i < 0:
		return nil, fmt.Errorf("%s is missing from the result", id)
	case want != nil && !equalValues(after.docs[i].value, want):
		return nil, fmt.Errorf("%s reads back differently", id)
	}
	beforeIDs, beforeValues := before.objects(id)
	afterIDs, afterValues := after.objects(id)
	if !slices.Equal(beforeIDs, afterIDs) || !equalValues(beforeValues, afterValues) {
		return nil, errors.New("other documents changed")
	}
	return after, nil
}

// hasObjects reports whether any document of the file defines an object.
func (f *file) hasObjects() bool {
	for _, d := range f.docs {
		if !d.info.Empty {
			return true
		}
	}
	return false
}

// objectValue returns obj as the JSON-like value documents are compared
// with.
func objectValue(obj *unstructured.Unstructured) (any, error) {
	jsonBytes, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidObject, IdentityOf(obj), err)
	}
	value, err := decodeJSON(jsonBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidObject, IdentityOf(obj), err)
	}
	return value, nil
}

// equalValues compares two JSON-like values, numbers by value (so "1e3"
// and "1000" are equal).
func equalValues(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalValues(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && equalNumbers(x, y)
	case string, bool, nil:
		return a == b
	default:
		return false
	}
}

// equalNumbers compares two JSON numbers exactly when both are integers and
// as floats otherwise.
func equalNumbers(a, b json.Number) bool {
	if a == b {
		return true
	}
	ai, errA := a.Int64()
	bi, errB := b.Int64()
	if errA == nil && errB == nil {
		return ai == bi
	}
	af, errA := a.Float64()
	bf, errB := b.Float64()
	return errA == nil && errB == nil && af == bf
}

// lineEnding returns the line ending the file uses, judged by its first
// line: "\r\n" or "\n".
func lineEnding(content []byte) string {
	if i := bytes.IndexByte(content, '\n'); i > 0 && content[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// withLineEnding converts a "\n"-terminated encoding to the file's line
// ending.
func withLineEnding(doc []byte, eol string) []byte {
	if eol == "\n" {
		return doc
	}
	return bytes.ReplaceAll(doc, []byte("\n"), []byte(eol))
}

// withTrailingEOL returns content ending with a line break.
func withTrailingEOL(content []byte, eol string) []byte {
	if len(content) == 0 || content[len(content)-1] == '\n' {
		return content
	}
	return concat(content, []byte(eol))
}

// concat joins byte slices into a new slice, never aliasing its inputs.
func concat(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}
