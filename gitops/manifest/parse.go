package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"
)

// ErrUnparseable is wrapped by every error about a file that is not a set of
// Kubernetes objects in YAML. It is an expected outcome (people write such
// files), so callers test for it with errors.Is and report the message,
// which names the document and the reason.
var ErrUnparseable = errors.New("unparseable manifest")

// DocInfo describes one document of a YAML file.
type DocInfo struct {
	// Index is the 0-based position of the document among the file's
	// documents, counting empty ones.
	Index int
	// Identity is the object the document defines; zero when Empty.
	Identity Identity
	// Empty is set for a document holding only comments or whitespace
	// (e.g. after a trailing "---"); it defines no object.
	Empty bool
	// Digest identifies the document's value; zero when Empty. A caller
	// that keeps it can tell that an object is already written as it is
	// (ValueDigest) without reading and parsing the file again.
	Digest Digest
}

// Digest is the SHA-256 of a document's value encoded as JSON (keys
// sorted, numbers as written). Equal digests mean equal values; different
// digests may still be equal values written differently ("1e3" and
// "1000"), so a match may spare work but a mismatch proves nothing.
type Digest [sha256.Size]byte

// ValueDigest is the Digest a document holding exactly obj has, whatever
// its formatting, key order, quoting or comments.
func ValueDigest(obj *unstructured.Unstructured) (Digest, error) {
	value, err := objectValue(obj)
	if err != nil {
		return Digest{}, err
	}
	return valueDigest(value)
}

// valueDigest hashes a JSON-like value (json.Marshal sorts mapping keys).
func valueDigest(value any) (Digest, error) {
	b, err := json.Marshal(value)
	if err != nil {
		return Digest{}, fmt.Errorf("encoding a document's value: %w", err)
	}
	return sha256.Sum256(b), nil
}

// Parse splits a (possibly multi-document) YAML file and returns the
// identity and value digest of every document, so a folder can be indexed
// without keeping the parsed objects. It fails with an error wrapping ErrUnparseable,
// naming the 1-based document and the reason, when the YAML does not parse,
// or a non-empty document is not a mapping or lacks apiVersion, kind or
// metadata.name.
func Parse(content []byte) ([]DocInfo, error) {
	f, err := parseFile(content)
	if err != nil {
		return nil, err
	}
	return f.infos(), nil
}

// infos describes the file's documents as Parse returns them.
func (f *file) infos() []DocInfo {
	infos := make([]DocInfo, len(f.docs))
	for i, d := range f.docs {
		infos[i] = d.info
		if d.info.Empty {
			continue
		}
		// A value decoded from JSON always encodes again; should it not,
		// the zero digest matches nothing and costs only the shortcut.
		infos[i].Digest, _ = valueDigest(d.value)
	}
	return infos
}

// file is a parsed YAML file: its segments (tiling the content) and the
// documents among them.
type file struct {
	content  []byte
	segments []segment
	docs     []document
}

// document is one document of a file with what edits need to know about it.
type document struct {
	info    DocInfo
	segment int // index into file.segments
	// value is the document as Kubernetes tooling reads it (YAML → JSON →
	// map/slice/json.Number/string/bool/nil); nil when empty.
	value any
}

// parseFile splits content into segments and parses every document.
func parseFile(content []byte) (*file, error) {
	if err := checkLineBreaks(content); err != nil {
		return nil, err
	}
	f := &file{content: content, segments: splitSegments(content)}
	for i, seg := range f.segments {
		if !seg.hasBody && seg.end > seg.start {
			// No content, but directives or markers can still be malformed.
			if err := checkNoDocument(content[seg.start:seg.end]); err != nil {
				return nil, fmt.Errorf("%w: line %d: %s", ErrUnparseable, seg.startLine, fileLines(err.Error(), seg.startLine-1))
			}
		}
		if !seg.isDocument() {
			continue
		}
		d := document{info: DocInfo{Index: len(f.docs), Empty: !seg.hasBody}, segment: i}
		if seg.hasBody {
			id, value, err := parseDocument(content[seg.start:seg.end])
			if err != nil {
				return nil, documentError(err, d.info.Index+1, seg)
			}
			d.info.Identity, d.value = id, value
		}
		f.docs = append(f.docs, d)
	}
	return f, nil
}

// documentError names the document (1-based number n) an error is about,
// with line numbers of the whole file, wrapping ErrUnsupportedDocument for
// constructs the editor refuses and ErrUnparseable for everything else.
func documentError(err error, n int, seg segment) error {
	sentinel := ErrUnparseable
	var refused *unsupportedError
	if errors.As(err, &refused) {
		sentinel = ErrUnsupportedDocument
	}
	return fmt.Errorf("%w: document %d (line %d): %s", sentinel, n, seg.firstLine, fileLines(err.Error(), seg.startLine-1))
}

// checkLineBreaks refuses line breaks other than LF and CRLF: YAML also
// breaks lines at a lone CR, NEL, LS and PS, where line-oriented tools
// (and the splitter) do not, so such a file means different things to
// different readers.
func checkLineBreaks(content []byte) error {
	at, name := foreignLineBreak(content)
	if at < 0 {
		return nil
	}
	line := bytes.Count(content[:at], []byte("\n")) + 1
	return fmt.Errorf("%w: line %d: line break other than LF or CRLF (%s), which tools read differently", ErrUnparseable, line, name)
}

// parseDocument parses the text of one segment and returns the identity of
// the object it defines and its JSON-like value. The text must parse with
// both YAML libraries of the ecosystem: yaml.v3 (kyaml, Kustomize, Flux) and
// sigs.k8s.io/yaml (kubectl, client-go, Argo CD), strictly, so duplicate
// keys are refused instead of being silently resolved differently by each.
// Documents the editor cannot own safely (see checkEditable) are refused
// with an *unsupportedError.
func parseDocument(text []byte) (Identity, any, error) {
	node, err := singleDocument(text)
	if err != nil {
		return Identity{}, nil, err
	}
	if err := checkEditable(node); err != nil {
		return Identity{}, nil, err
	}
	value, err := yamlValue(text)
	if err != nil {
		return Identity{}, nil, err
	}
	id, err := identityOfValue(value)
	if err != nil {
		return Identity{}, nil, err
	}
	return id, value, nil
}

// singleDocument parses text with yaml.v3, checks that it holds exactly
// one document (i.e. that the splitter and the parser agree) and returns
// that document's node tree.
func singleDocument(text []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var docs []*yaml.Node
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invalid YAML: %w", HideValues(err))
		}
		docs = append(docs, &node)
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("invalid YAML: expected one document between separators, found %d", len(docs))
	}
	return docs[0], nil
}

// checkNoDocument checks that text without content (comments, blank
// lines, directives, markers) is valid YAML.
func checkNoDocument(text []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(text))
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("invalid YAML: %w", HideValues(err))
		}
	}
}

// yamlValue converts one YAML document to the JSON-like value Kubernetes
// tooling sees, with numbers kept exact as json.Number.
func yamlValue(text []byte) (any, error) {
	jsonBytes, err := sigsyaml.YAMLToJSONStrict(text)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", HideValues(err))
	}
	return decodeJSON(jsonBytes)
}

// HideValues returns err with the document values a YAML library quotes in its message left
// out: yaml.v2 (under sigs.k8s.io/yaml) quotes a scalar it cannot decode in backquotes and a
// complex key it cannot use after "invalid map key: ", sigs.k8s.io/yaml prints the whole
// value under a key it cannot convert after ", value: ", and both YAML libraries quote an
// anchor's name in single quotes ("unknown anchor 'x' referenced"), which an unquoted value
// starting with "*" or "&" becomes.
// Messages about a repository's files reach conditions and admission answers, read by people
// who may not read the repository, and a value may be a secret. errors.Is and As still see
// err.
func HideValues(err error) error {
	if err == nil {
		return nil
	}
	msg := hideValues(err.Error())
	if msg == err.Error() {
		return err
	}
	return &hiddenValuesError{msg: msg, err: err}
}

// hideValues cuts a message after "invalid map key:" and at ", value: ", replaces an
// anchor's quoted name, up to the message's last single quote, by "'…'", and everything
// from its first backquote to its last by "`…`": a value holding a quote is hidden whole
// too. Pure.
func hideValues(msg string) string {
	if i := strings.Index(msg, ", value: "); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, "anchor '"); i >= 0 {
		start := i + len("anchor '")
		if end := strings.LastIndexByte(msg, '\''); end >= start {
			msg = msg[:start] + "…'" + msg[end+1:]
		} else {
			msg = msg[:start] + "…'"
		}
	}
	if i := strings.Index(msg, "invalid map key:"); i >= 0 {
		msg = msg[:i+len("invalid map key:")] + " a mapping or sequence"
	}
	first, last := strings.IndexByte(msg, '`'), strings.LastIndexByte(msg, '`')
	if first < 0 {
		return msg
	}
	if first == last {
		return msg[:first] + "`…"
	}
	return msg[:first] + "`…`" + msg[last+1:]
}

// hiddenValuesError is an error whose message had document values removed (HideValues).
type hiddenValuesError struct {
	msg string
	err error
}

func (e *hiddenValuesError) Error() string { return e.msg }
func (e *hiddenValuesError) Unwrap() error { return e.err }

// decodeJSON decodes JSON keeping numbers as json.Number, so large integers
// survive comparison.
func decodeJSON(jsonBytes []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(jsonBytes))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	return value, nil
}

// identityOfValue checks that a document's value is a Kubernetes object and
// returns its identity.
func identityOfValue(value any) (Identity, error) {
	object, ok := value.(map[string]any)
	if !ok {
		return Identity{}, fmt.Errorf("not a mapping but %s", describeValue(value))
	}
	apiVersion, err := requiredString(object, "apiVersion", "apiVersion")
	if err != nil {
		return Identity{}, err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return Identity{}, fmt.Errorf("invalid apiVersion %q: %w", apiVersion, err)
	}
	kind, err := requiredString(object, "kind", "kind")
	if err != nil {
		return Identity{}, err
	}
	if _, items := object["items"].([]any); items && strings.HasSuffix(kind, "List") {
		// Kustomize (and so Flux) and kubectl apply its items, not it: the objects it holds
		// would be invisible to the writer, which would then define them twice.
		return Identity{}, fmt.Errorf("a %s, whose items kubectl, Kustomize and Flux apply one by one: write each item as a document of its own", kind)
	}
	metadata, ok := object["metadata"].(map[string]any)
	if !ok {
		if _, present := object["metadata"]; !present || object["metadata"] == nil {
			return Identity{}, errors.New("missing metadata.name")
		}
		return Identity{}, fmt.Errorf("metadata is %s, not a mapping", describeValue(object["metadata"]))
	}
	name, err := requiredString(metadata, "name", "metadata.name")
	if err != nil {
		return Identity{}, err
	}
	namespace, ok := metadata["namespace"].(string)
	if !ok && metadata["namespace"] != nil {
		return Identity{}, fmt.Errorf("metadata.namespace is %s, not a string", describeValue(metadata["namespace"]))
	}
	return Identity{Group: gv.Group, Kind: kind, Namespace: namespace, Name: name}, nil
}

// requiredString returns the non-empty string at key, or explains what is
// wrong with it using the field's full path.
func requiredString(object map[string]any, key, field string) (string, error) {
	raw, present := object[key]
	if !present || raw == nil {
		return "", fmt.Errorf("missing %s", field)
	}
	s, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("%s is %s, not a string", field, describeValue(raw))
	}
	if s == "" {
		return "", fmt.Errorf("missing %s (it is empty)", field)
	}
	return s, nil
}

// fileLines rewrites the "line N" references of a parser message about one
// segment into line numbers of the whole file, so people can jump to them.
func fileLines(message string, offset int) string {
	if offset == 0 {
		return message
	}
	var b strings.Builder
	for {
		i := strings.Index(message, "line ")
		if i < 0 {
			break
		}
		j := i + len("line ")
		k := j
		for k < len(message) && message[k] >= '0' && message[k] <= '9' {
			k++
		}
		b.WriteString(message[:j])
		if n, err := strconv.Atoi(message[j:k]); err == nil {
			b.WriteString(strconv.Itoa(n + offset))
		} else {
			b.WriteString(message[j:k])
		}
		message = message[k:]
	}
	b.WriteString(message)
	return b.String()
}

// describeValue names the JSON type of a value for error messages.
func describeValue(value any) string {
	switch value.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a sequence"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	default:
		return fmt.Sprintf("a %T", value)
	}
}

// find returns the index in f.docs of the document defining id, or -1. Two
// documents with the same identity are refused with ErrDuplicateIdentity:
// editing either would leave the file ambiguous.
func (f *file) find(id Identity) (int, error) {
	found := -1
	for i, d := range f.docs {
		if d.info.Empty || d.info.Identity != id {
			continue
		}
		if found >= 0 {
			return -1, fmt.Errorf("%w: %s is defined by documents %d and %d", ErrDuplicateIdentity, id, found+1, i+1)
		}
		found = i
	}
	return found, nil
}

// objects returns the identities and values of the non-empty documents, in
// file order, skipping the one with identity skip.
func (f *file) objects(skip Identity) ([]Identity, []any) {
	var ids []Identity
	var values []any
	for _, d := range f.docs {
		if d.info.Empty || d.info.Identity == skip {
			continue
		}
		ids = append(ids, d.info.Identity)
		values = append(values, d.value)
	}
	return ids, values
}
