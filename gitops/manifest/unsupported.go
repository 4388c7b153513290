package manifest

import (
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// ErrUnsupportedDocument is wrapped by every error about a document that
// parses but that the editor cannot own safely: it uses anchors or aliases
// (an edit would silently change other places too), merge keys, custom
// tags (other tools may read them differently), complex or duplicate keys
// (tools disagree on which one wins). The message names the document, the
// line and the construct, so a person can rewrite it; the folder holding
// the file is refused instead of the file being reformatted.
var ErrUnsupportedDocument = errors.New("unsupported document")

// unsupportedError is the reason a document is not editable, before
// parseFile names the document.
type unsupportedError struct{ reason string }

// Error returns the reason.
func (e *unsupportedError) Error() string { return e.reason }

// unsupported builds an unsupportedError.
func unsupported(format string, args ...any) error {
	return &unsupportedError{reason: fmt.Sprintf(format, args...)}
}

// coreTags are the explicit tags the editor accepts: they only restate
// what the value already is in JSON terms.
func coreTags() []string {
	return []string{"!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq"}
}

// checkEditable walks a parsed document and refuses the constructs the
// editor cannot own safely. Line numbers are those of the parsed text.
func checkEditable(node *yaml.Node) error {
	if node == nil {
		return nil
	}
	if err := checkNode(node); err != nil {
		return err
	}
	if node.Kind == yaml.MappingNode {
		if err := checkKeys(node); err != nil {
			return err
		}
	}
	for _, child := range node.Content {
		if err := checkEditable(child); err != nil {
			return err
		}
	}
	return nil
}

// checkNode refuses anchors, aliases and custom tags on one node. It names them by line
// and column, not by their text: an unquoted value starting with "*", "&" or "!" (a
// password typed as "!Welcome2024") reads as one, and the reason reaches conditions and the
// admission answers of people who may not read the repository. Only YAML's own types are
// named (taggedName).
func checkNode(node *yaml.Node) error {
	switch {
	case node.Kind == yaml.AliasNode:
		return unsupported("alias (line %d, column %d): an edit through an alias would change the anchored value too", node.Line, node.Column)
	case node.Anchor != "":
		return unsupported("anchor (line %d, column %d): an edit would change every alias of it too", node.Line, node.Column)
	case node.Style&yaml.TaggedStyle != 0 && !isCoreTag(node.Tag):
		return unsupported("%s (line %d, column %d): tools other than this one may read it differently", taggedName(node.Tag), node.Line, node.Column)
	}
	return nil
}

// taggedName names an explicit tag for a message: one of YAML's own types by its name
// ("custom tag !!binary"), any other tag, which may be a value typed without quotes, not.
func taggedName(tag string) string {
	switch tag {
	case "!!binary", "!!set", "!!omap", "!!pairs", "!!timestamp", "!!merge", "!!value", "!!yaml":
		return "custom tag " + tag
	}
	return "custom tag"
}

// isCoreTag reports whether an explicit tag is one of coreTags.
func isCoreTag(tag string) bool {
	for _, t := range coreTags() {
		if t == tag {
			return true
		}
	}
	return false
}

// checkKeys refuses merge keys, non-scalar keys and duplicate keys (as
// Kubernetes tooling resolves them: "yes" and "true" are the same key).
func checkKeys(mapping *yaml.Node) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		key := mapping.Content[i]
		if key.Kind != yaml.ScalarNode {
			return unsupported("complex mapping key (line %d): Kubernetes objects only have string keys", key.Line)
		}
		if key.Tag == "!!merge" && key.Style&yaml.TaggedStyle == 0 {
			return unsupported("merge key << (line %d): its fields come from another place in the file", key.Line)
		}
		name, err := resolveKey(key)
		if err != nil {
			name = key.Value
		}
		if first, dup := seen[name]; dup {
			return unsupported("duplicate key %q (lines %d and %d): tools disagree on which one wins", name, first, key.Line)
		}
		seen[name] = key.Line
	}
	return nil
}

// resolveKey returns the JSON key a mapping key becomes for Kubernetes
// tooling (sigs.k8s.io/yaml, YAML 1.1): a plain "yes" is the key "true", a
// plain "0x1" is "1". Quoted and block keys are taken as written.
func resolveKey(key *yaml.Node) (string, error) {
	if key.Kind != yaml.ScalarNode {
		return "", errors.New("mapping key is not a scalar")
	}
	if key.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 || key.Tag == "!!str" && key.Style&yaml.TaggedStyle != 0 {
		return key.Value, nil
	}
	if key.Style&yaml.TaggedStyle != 0 {
		return "", fmt.Errorf("tagged mapping key %s %s", key.Tag, key.Value)
	}
	if isPlainWord(key.Value) && !isYAML11Word(key.Value) {
		return key.Value, nil
	}
	return resolvePlainKey(key.Value)
}

// resolvePlainKey asks sigs.k8s.io/yaml what a plain key becomes in JSON.
func resolvePlainKey(text string) (string, error) {
	jsonBytes, err := sigsyaml.YAMLToJSON([]byte(text + ": 0\n"))
	if err != nil {
		return "", fmt.Errorf("resolving key %q: %w", text, HideValues(err))
	}
	value, err := decodeJSON(jsonBytes)
	if err != nil {
		return "", err
	}
	object, ok := value.(map[string]any)
	if !ok || len(object) != 1 {
		return "", fmt.Errorf("resolving key %q: not a single key", text)
	}
	for k := range object {
		return k, nil
	}
	return "", fmt.Errorf("resolving key %q: no key", text)
}

// isPlainWord reports whether s is a letter or underscore followed by
// letters, digits and "_./-": text that every YAML version reads as the same
// string unless it is one of the YAML 1.1 words.
func isPlainWord(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_'
		if i == 0 && !letter {
			return false
		}
		if !letter && !(r >= '0' && r <= '9') && r != '.' && r != '/' && r != '-' {
			return false
		}
	}
	return s != ""
}

// isYAML11Word reports whether a plain word means something other than a
// string in YAML 1.1 (booleans and null), whatever its case.
func isYAML11Word(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE",
		"on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL":
		return true
	}
	return false
}
