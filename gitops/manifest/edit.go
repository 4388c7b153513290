package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
// When a document with obj's identity exists, it is edited in place: only
// the values that differ are rewritten, so key order, comments, blank
// lines, quoting and block scalars of everything else stay byte-identical,
// as do the other documents, the "---" and "..." framing, the comments
// before the first document, the line endings and a byte order mark. Keys
// the object no longer has leave with their comments; new keys go after
// their siblings; list items are matched by their merge key ("name",
// "containerPort"...) rather than by position. Should the in-place edit
// not read back as obj (a layout the editor does not foresee), the
// document is rewritten whole instead, keeping the rest of the file.
// Otherwise obj is appended after a "---" separator, in the file's
// sequence indentation (see DetectStyle), or returned alone when content
// is empty.
//
// When the existing document already means obj (same data once parsed,
// whatever the formatting or key order), content is returned unchanged with
// changed=false, so an unchanged object never produces a commit.
//
// Errors wrap ErrInvalidObject (obj cannot be written), ErrUnparseable
// (content is not a set of Kubernetes objects), ErrUnsupportedDocument (a
// document uses anchors, aliases, merge keys, custom tags or duplicate
// keys), ErrDuplicateIdentity or ErrEditVerification.
func Upsert(content []byte, obj *unstructured.Unstructured) (out []byte, changed bool, err error) {
	return UpsertStyled(content, obj, Style{})
}

// UpsertStyled is Upsert for a file of a folder with a known style: style
// is used for what the file itself does not show (a new file, or a file
// without block sequences), so that new files match their folder.
func UpsertStyled(content []byte, obj *unstructured.Unstructured, style Style) (out []byte, changed bool, err error) {
	e, err := UpsertIndexed(content, obj, style)
	return e.Content, e.Changed, err
}

// Edited is what an edit produced: the new content and, when it changed, its documents
// exactly as Parse(Content) returns them, read back while the edit was verified. A caller
// that indexes the files it writes need not parse them a second time.
type Edited struct {
	Content []byte
	Changed bool
	// Docs is nil when nothing changed.
	Docs []DocInfo
}

// UpsertIndexed is UpsertStyled that also returns the documents of the result.
func UpsertIndexed(content []byte, obj *unstructured.Unstructured, style Style) (Edited, error) {
	if err := checkObject(obj); err != nil {
		return Edited{}, err
	}
	want, err := objectValue(obj)
	if err != nil {
		return Edited{}, err
	}
	id := IdentityOf(obj)
	before, err := parseFile(content)
	if err != nil {
		return Edited{}, err
	}
	i, err := before.find(id)
	if err != nil {
		return Edited{}, err
	}
	if i >= 0 && equalValues(before.docs[i].value, want) {
		return Edited{Content: content}, nil
	}
	if fileStyle, ok := DetectStyle(content); ok {
		style = fileStyle
	}
	if len(content) == 0 {
		if after, err := newFile(id, want, style); err == nil {
			return Edited{Content: after.content, Changed: true, Docs: after.infos()}, nil
		}
		// The way below makes the same file and says what is wrong with it.
	}
	after, err := firstVerified(before, id, want, upsertCandidates(before, i, obj, want, style))
	if err != nil {
		return Edited{}, err
	}
	return Edited{Content: after.content, Changed: true, Docs: after.infos()}, nil
}

// firstVerified returns the first candidate content that reads back as
// want for id with every other object unchanged, parsed. An object that
// cannot be encoded stops the search; other failures are collected into an
// error wrapping ErrEditVerification.
func firstVerified(before *file, id Identity, want any, all []candidates) (*file, error) {
	var errs []error
	for _, candidates := range all {
		outs, err := candidates()
		if errors.Is(err, ErrInvalidObject) {
			return nil, err
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, out := range outs {
			after, err := verifyEdit(keepBOM(before.content, out), before, id, want)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			return after, nil
		}
	}
	return nil, fmt.Errorf("%w: writing %s: %w", ErrEditVerification, id, oneLine(errs))
}

// newFile writes the object (id, want) as a new file in style and reads it back with less
// work than verifyEdit: the first write of every object of a folder (a snapshot of 10,000
// objects) spends half its time reading its own output back. The tree printed is the
// editor's own (no anchors, aliases, tags or merge keys: checkEditable looks at the tree
// instead of a re-read of the text), the splitter must see one document, and the reader
// Kubernetes tools use (sigs.k8s.io/yaml, where YAML 1.1 differs from what yaml.v3 prints)
// must read it back as want. Left out is yaml.v3 parsing what yaml.v3 printed, which is
// yaml.v3's own round trip (FuzzObjectUpsert checks the new files it makes with the full
// parse).
// An error sends the caller to verifyEdit, which says what is wrong.
func newFile(id Identity, want any, style Style) (*file, error) {
	root, err := peopleNode(nil, want)
	if err != nil {
		return nil, err
	}
	if err := checkEditable(root); err != nil {
		return nil, err
	}
	out, err := printStyled(root, style)
	if err != nil {
		return nil, err
	}
	if err := checkLineBreaks(out); err != nil {
		return nil, err
	}
	segments := splitSegments(out)
	if len(segments) != 1 || !segments[0].hasBody || segments[0].hasSep {
		return nil, fmt.Errorf("%s: the splitter does not read one document", id)
	}
	value, err := yamlValue(out[segments[0].start:segments[0].end])
	if err != nil {
		return nil, err
	}
	if got, err := identityOfValue(value); err != nil || got != id || !equalValues(value, want) {
		return nil, fmt.Errorf("%s reads back differently", id)
	}
	return &file{content: out, segments: segments, docs: []document{{info: DocInfo{Identity: id}, value: value}}}, nil
}

// oneLine is errors.Join on one line, each message once: the reasons every way of writing a
// document failed reach a GitTarget's Ready message, where errors.Join's lines and repeats
// would not read.
type oneLine []error

func (e oneLine) Error() string {
	var parts []string
	for _, err := range e {
		if msg := err.Error(); !slices.Contains(parts, msg) {
			parts = append(parts, msg)
		}
	}
	return strings.Join(parts, "; ")
}

func (e oneLine) Unwrap() []error { return e }

// Remove deletes the document with identity id, and its separator, from
// content, keeping every other document byte-identical, the comments before
// the file's first "---", and a comment block introducing the next document
// (see cutDocument; a layout where keeping it would not verify loses it).
// empty is true when no document defining an object remains, so the caller
// deletes the file. When no document has that identity, content is returned
// unchanged with a nil error.
//
// Errors wrap ErrUnparseable, ErrUnsupportedDocument (for any document of
// the file, since the file as a whole cannot be owned), ErrDuplicateIdentity
// or ErrEditVerification.
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
	var errs []error
	for _, c := range cuts() {
		out = keepBOM(before.content, cutDocument(before, i, c))
		after, err := verifyEdit(out, before, id, nil)
		if err == nil {
			return out, !after.hasObjects(), nil
		}
		errs = append(errs, err)
	}
	return nil, false, fmt.Errorf("%w: removing %s: %w", ErrEditVerification, id, oneLine(errs))
}

// keepBOM puts content's byte order mark back in front of out when an edit that rewrote,
// or cut, the file's first document lost it: a file keeps its BOM as it keeps its line
// endings. Pure.
func keepBOM(content, out []byte) []byte {
	const bom = "\uFEFF"
	if !bytes.HasPrefix(content, []byte(bom)) || len(out) == 0 || bytes.HasPrefix(out, []byte(bom)) {
		return out
	}
	return append([]byte(bom), out...)
}

// candidates produces possible new file contents, preferred first.
type candidates func() ([][]byte, error)

// upsertCandidates returns the ways to write obj into f, preferred first,
// each computed only when the ones before it fail verification: for an
// existing document (index i) the in-place edit, then the in-place edit
// with new multi-line strings double-quoted, then a rewrite of the whole
// document keeping trailing comments, then one dropping them (they may
// have been block-scalar content); for a new document (i < 0) the file
// with the document appended.
func upsertCandidates(f *file, i int, obj *unstructured.Unstructured, want any, style Style) []candidates {
	eol := lineEnding(f.content)
	if i < 0 {
		return []candidates{func() ([][]byte, error) {
			doc, err := encodeValue(IdentityOf(obj), want, style)
			if err != nil {
				return nil, err
			}
			return [][]byte{appendDocument(f, withLineEnding(doc, eol), eol)}, nil
		}}
	}
	seg := f.segments[f.docs[i].segment]
	inPlace := func(quoteMultiline bool) candidates {
		return func() ([][]byte, error) {
			return editDocument(f, seg, f.docs[i].value, want, style, eol, quoteMultiline)
		}
	}
	rewrite := func() ([][]byte, error) {
		body, err := encodeValue(IdentityOf(obj), want, style)
		if err != nil {
			return nil, fmt.Errorf("rewriting %s: %w", IdentityOf(obj), err)
		}
		body = withLineEnding(body, eol)
		return [][]byte{spliceBody(f.content, seg, body, true, eol), spliceBody(f.content, seg, body, false, eol)}, nil
	}
	return []candidates{inPlace(false), inPlace(true), rewrite}
}

// editDocument edits the document of segment seg in place (see
// editInPlace), from its first content line to its "..." marker or the end
// of its trailing comments, and returns the whole file. When the file
// lacked a final line break, the result without one comes first, then the
// one with it (needed when the document now ends with a block scalar).
// With quoteMultiline, new multi-line strings are double-quoted, for when a
// new block scalar would take in the comment lines that follow it.
func editDocument(f *file, seg segment, old, want any, style Style, eol string, quoteMultiline bool) ([][]byte, error) {
	if seg.inline {
		return nil, fmt.Errorf("%w: the document starts on its separator line", errLayout)
	}
	end := seg.end
	if seg.ended() {
		end = seg.endMarker
	}
	text, err := editInPlace(f.content[seg.bodyStart:end], old, want, style, eol, quoteMultiline)
	if err != nil {
		return nil, err
	}
	out := concat(f.content[:seg.bodyStart], text, f.content[end:])
	if len(f.content) > 0 && f.content[len(f.content)-1] != '\n' && end == len(f.content) {
		return [][]byte{bytes.TrimSuffix(out, []byte(eol)), out}, nil
	}
	return [][]byte{out}, nil
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

// cut says what a removal keeps besides the other documents.
type cut struct {
	// directives keeps the "%YAML"/"%TAG" lines before the file's first "---" when
	// that document goes; without, only its comments stay (the next document may bring
	// directives of its own, which would clash).
	directives bool
	// next keeps the comments introducing the next document (nextDocumentComments).
	next bool
}

// cuts are the ways to remove a document, preferred first: each is tried until one
// verifies, the last being the whole segment with only the file's header comments kept.
func cuts() []cut {
	return []cut{{directives: true, next: true}, {directives: true}, {next: true}, {}}
}

// cutDocument returns content without the i-th document's segment. The
// comments before the file's first document stay (they describe the file:
// those before its "---", or before its content when it has none), and with
// them their directives as c says; so, when c.next is set, does a comment
// block just above the next document's "---", written at column 0 and set
// apart by a blank line from what is above it (it describes that document,
// though the splitter files it under this one's tail). Such a block above
// this document's "---" stays too: it may be the previous document's own (a
// commented-out field), and a stray comment is better than a lost one. The
// segment's "..." marker stays when the document before it does not end
// itself and the next document relies on the marker: it has no "---", or
// directives precede it.
func cutDocument(f *file, i int, c cut) []byte {
	index := f.docs[i].segment
	seg := f.segments[index]
	head := f.content[:seg.start]
	switch {
	case i == 0 && seg.hasSep:
		if head = f.content[:seg.sepStart]; !c.directives {
			head = withoutDirectives(head)
		}
	case i == 0 && index == 0:
		head = f.content[:seg.bodyStart]
	}
	to := seg.end
	previousNeedsEnd := i > 0 && !f.segments[f.docs[i-1].segment].ended()
	switch {
	case index+1 == len(f.segments):
	case seg.ended() && previousNeedsEnd && reliesOnEnd(f, f.segments[index+1]):
		to = seg.endMarker
	case !seg.ended() && c.next:
		apart, comments := nextDocumentComments(f.content, seg)
		if to = apart; len(head) == 0 {
			to = comments // the file starts with them: no blank line above
		}
	}
	return concat(head, f.content[to:])
}

// withoutDirectives is lead without its directive lines.
func withoutDirectives(lead []byte) []byte {
	var out []byte
	for _, l := range splitLines(lead) {
		if l.class != lineDirective {
			out = append(out, lead[l.start:l.end]...)
		}
	}
	return out
}

// reliesOnEnd reports whether segment next needs the "..." marker before
// it when the document before it does not end itself: it starts without
// "---", or with directives, which YAML allows only after an ended document.
func reliesOnEnd(f *file, next segment) bool {
	if !next.hasSep {
		return true
	}
	for _, l := range splitLines(f.content[next.start:next.leadEnd()]) {
		if l.class == lineDirective {
			return true
		}
	}
	return false
}

// nextDocumentComments finds the comment block that ends seg's tail when
// every line of it starts with "#" at column 0 and a blank line sets it apart
// from what is above it: written against the next "---", it introduces the
// next document (an indented comment belongs to this document's content).
// It returns where the blank line before the block starts and where the
// block starts, or seg.end twice when there is no such block.
func nextDocumentComments(content []byte, seg segment) (apart, comments int) {
	lines := splitLines(content[seg.bodyEnd:seg.end])
	start := len(lines)
	for start > 0 && lines[start-1].class == lineComment && content[seg.bodyEnd+lines[start-1].start] == '#' {
		start--
	}
	if start == len(lines) || start == 0 || lines[start-1].class != lineBlank {
		return seg.end, seg.end
	}
	return seg.bodyEnd + lines[start-1].start, seg.bodyEnd + lines[start].start
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
// with: what encoding obj.Object as JSON and decoding it with UseNumber
// gives. The value trees informers hold (maps, slices, strings, int64,
// float64, bool, nil) are converted directly, which is a sixth of the work
// of writing a new object (BenchmarkPlanNewObject in gitops/batch); any other
// Go type, a float JSON cannot encode, or a string that is not valid UTF-8
// (which encoding/json rewrites) goes through the JSON round trip.
func objectValue(obj *unstructured.Unstructured) (any, error) {
	if value, ok := jsonLike(obj.Object); ok {
		return value, nil
	}
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

// jsonLike converts a value tree of the types encoding/json decodes into
// (with int64 for integers, as Kubernetes' decoders use) to the JSON-like
// form. ok is false when v holds anything else, or a value whose JSON round
// trip is not the identity; the caller then takes the round trip.
func jsonLike(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return nil, true // JSON null, as encoding/json writes a nil map
		}
		out := make(map[string]any, len(x))
		for k, item := range x {
			if !utf8.ValidString(k) {
				return nil, false
			}
			value, ok := jsonLike(item)
			if !ok {
				return nil, false
			}
			out[k] = value
		}
		return out, true
	case []any:
		if x == nil {
			return nil, true // JSON null, as encoding/json writes a nil slice
		}
		out := make([]any, len(x))
		for i, item := range x {
			value, ok := jsonLike(item)
			if !ok {
				return nil, false
			}
			out[i] = value
		}
		return out, true
	case string:
		return x, utf8.ValidString(x)
	case bool, nil:
		return x, true
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), true
	case float64:
		// encoding/json's own formatting (and its refusal of NaN and the
		// infinities), so a float renders as it always did.
		b, err := json.Marshal(x)
		return json.Number(b), err == nil
	default:
		return nil, false
	}
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
