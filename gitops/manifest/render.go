package manifest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// maxFlowWidth is the longest single line a flow collection the file
// already wrote in flow style ("ports: [80, 443]") is kept flow for; past
// it the new value is written in block style.
const maxFlowWidth = 100

// valueNode builds the YAML node of a JSON-like value (as objectValue
// returns it), with mapping keys sorted and strings quoted where YAML 1.1
// or 1.2 would read them as something else.
func valueNode(v any) (*yaml.Node, error) {
	switch x := v.(type) {
	case map[string]any:
		return mappingNode(x)
	case []any:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, item := range x {
			child, err := valueNode(item)
			if err != nil {
				return nil, err
			}
			seq.Content = append(seq.Content, child)
		}
		return seq, nil
	case json.Number:
		return numberNode(x)
	case string:
		return stringNode(x), nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatBool(x)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	default:
		return nil, fmt.Errorf("%w: unexpected %T in an object", ErrInvalidObject, v)
	}
}

// mappingNode builds the node of a mapping, keys sorted.
func mappingNode(m map[string]any) (*yaml.Node, error) {
	node := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		value, err := valueNode(m[k])
		if err != nil {
			return nil, err
		}
		node.Content = append(node.Content, stringNode(k), value)
	}
	return node, nil
}

// numberNode builds the node of a JSON number, written as yaml.v3 writes
// Go integers and floats. The tag is left implicit: a float such as 1e3
// then prints without "!!float".
func numberNode(n json.Number) (*yaml.Node, error) {
	if i, err := n.Int64(); err == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatInt(i, 10)}, nil
	}
	f, err := n.Float64()
	if err != nil {
		return nil, fmt.Errorf("%w: number %s: %w", ErrInvalidObject, n, err)
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatFloat(f, 'g', -1, 64)}, nil
}

// stringNode builds the node of a string the way yaml.v3 marshals one:
// plain when that reads back as the same string (yaml.v3 quotes it when
// printing otherwise), double-quoted for the YAML 1.1 booleans and
// sexagesimal numbers it also guards against and for "<<" (which it would
// print as a merge key), a literal block when multi-line (see
// safeScalarStyle for the exceptions).
func stringNode(s string) *yaml.Node {
	node := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case needsEscapes(s):
		node.Style = yaml.DoubleQuotedStyle
	case strings.Contains(s, "\n"):
		node.Style = yaml.LiteralStyle
	case isYAML11Word(s) || isSexagesimal(s) || s == "<<":
		node.Style = yaml.DoubleQuotedStyle
	}
	safeScalarStyle(node)
	return node
}

// isSexagesimal reports whether s is a YAML 1.1 base-60 number ("1:30",
// "-2:10:05.5"), which YAML 1.1 readers take for a number.
func isSexagesimal(s string) bool {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	i := digitsOrUnderscores(s, 0)
	if i == 0 || s[0] == '_' {
		return false
	}
	groups := 0
	for i < len(s) && s[i] == ':' {
		j := i + 1
		k := j
		for k < len(s) && k-j < 2 && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == j || k-j == 2 && s[j] > '5' {
			return false
		}
		i, groups = k, groups+1
	}
	if groups == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i = digitsOrUnderscores(s, i+1)
	}
	return i == len(s)
}

// digitsOrUnderscores returns the end of the run of digits and
// underscores starting at i.
func digitsOrUnderscores(s string, i int) int {
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
		i++
	}
	return i
}

// safeScalarStyle double-quotes a multi-line string that must not be a
// block scalar (see blockUnsafe).
func safeScalarStyle(n *yaml.Node) {
	if n.Tag == "!!str" && (blockUnsafe(n.Value) || needsEscapes(n.Value)) {
		n.Style = yaml.DoubleQuotedStyle
	}
}

// needsEscapes reports whether a string holds a carriage return or a line break other
// than LF (NEL, LS, PS): printed raw, YAML readers would take it for a line break (and
// checkLineBreaks refuses such files), so only a double-quoted string, which escapes it,
// reads back the same.
func needsEscapes(s string) bool {
	return strings.ContainsAny(s, "\r\u0085\u2028\u2029")
}

// blockUnsafe reports whether a multi-line string must not be written as a
// block scalar: one starting with a blank or a line break needs an
// indentation indicator, which yaml.v3 miscomputes inside sequences; one
// ending with several line breaks needs "+" chomping, which would also
// take in the blank lines that follow it in the file.
func blockUnsafe(s string) bool {
	if !strings.Contains(s, "\n") {
		return false
	}
	return strings.IndexAny(s[:1], " \t\n") == 0 || strings.HasSuffix(s, "\n\n")
}

// peopleNode builds the node of the value at path of an object, ordered
// as Encode orders a whole object.
func peopleNode(path []string, v any) (*yaml.Node, error) {
	node, err := valueNode(v)
	if err != nil {
		return nil, err
	}
	orderForPeople(node, path)
	return node, nil
}

// keepStyle gives a new value the presentation of the one it replaces
// where that is safe: a quoted or block string stays quoted or block (also
// inside collections, matched by key or position), a non-empty flow
// collection stays flow.
func keepStyle(node, old *yaml.Node) {
	if old == nil {
		return
	}
	if node.Kind != yaml.ScalarNode && old.Kind == node.Kind && old.Style&yaml.FlowStyle != 0 && len(old.Content) > 0 {
		node.Style = yaml.FlowStyle
	}
	keepQuoting(node, old)
}

// keepQuoting applies the quoting of old's strings to node's, recursively.
func keepQuoting(node, old *yaml.Node) {
	switch {
	case node.Kind == yaml.ScalarNode && old.Kind == yaml.ScalarNode:
		keepScalarStyle(node, old)
	case node.Kind == yaml.SequenceNode && old.Kind == yaml.SequenceNode:
		for i := range min(len(node.Content), len(old.Content)) {
			keepQuoting(node.Content[i], old.Content[i])
		}
	case node.Kind == yaml.MappingNode && old.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			if j := keyIndex(old, node.Content[i].Value); j >= 0 {
				keepQuoting(node.Content[i+1], old.Content[j+1])
			}
		}
	}
}

// keyIndex returns the index in a mapping's content of the key with the
// given value, or -1.
func keyIndex(mapping *yaml.Node, key string) int {
	for j := 0; j+1 < len(mapping.Content); j += 2 {
		if mapping.Content[j].Value == key {
			return j
		}
	}
	return -1
}

// keepScalarStyle quotes a new string like the old one was: in the same
// quotes, or as a block when the old one was a block (a multi-line new
// string is never squeezed into quotes).
func keepScalarStyle(node, old *yaml.Node) {
	if node.Tag != "!!str" {
		return
	}
	kept := old.Style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle)
	if kept == 0 || needsEscapes(node.Value) {
		return
	}
	block := kept&(yaml.LiteralStyle|yaml.FoldedStyle) != 0
	switch {
	case block && blockUnsafe(node.Value):
	case block || !strings.Contains(node.Value, "\n"):
		node.Style = kept
	}
}

// lines prints a node tree in the editor's style and splits it into lines
// without line breaks.
func (ed *editor) lines(node *yaml.Node) ([]string, error) {
	if ed.quoteMultiline {
		quoteMultiline(node)
	}
	out, err := printStyled(node, ed.style)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSuffix(string(out), "\n")
	return strings.Split(text, "\n"), nil
}

// quoteMultiline double-quotes every string of a tree that would be a
// block scalar: multi-line ones, and those given a block style.
func quoteMultiline(n *yaml.Node) {
	block := n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || strings.Contains(n.Value, "\n")
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && block {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, child := range n.Content {
		quoteMultiline(child)
	}
}

// styledLines prints node with the style of old kept (see keepStyle),
// falling back to yaml.v3's choice when a kept flow style gives an
// overlong line.
func (ed *editor) styledLines(wrap func(*yaml.Node) *yaml.Node, node, old *yaml.Node) ([]string, error) {
	plain := node.Style
	keepStyle(node, old)
	if node.Style&yaml.FlowStyle == 0 || node.Style == plain {
		return ed.lines(wrap(node))
	}
	lines, err := ed.lines(wrap(node))
	if err == nil && len(lines) == 1 && len(lines[0]) <= maxFlowWidth {
		return lines, nil
	}
	node.Style = plain
	return ed.lines(wrap(node))
}

// renderPairValue renders want as the value of a mapping key at column
// col. It returns what follows the ':' on the key's line (" value", " |-"
// or "" when a block collection follows) and the following lines, already
// indented.
func (ed *editor) renderPairValue(path []string, col int, want any, old *yaml.Node) (string, []string, error) {
	node, err := peopleNode(path, want)
	if err != nil {
		return "", nil, err
	}
	wrap := func(n *yaml.Node) *yaml.Node {
		return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: "k"}, n}}
	}
	lines, err := ed.styledLines(wrap, node, old)
	if err != nil {
		return "", nil, err
	}
	first, ok := strings.CutPrefix(lines[0], "k:")
	if !ok {
		// The line holds the value: never quoted, since the error reaches status and a value may be a secret.
		return "", nil, fmt.Errorf("%w: unexpected rendering of the value at %s", errLayout, strings.Join(path, "."))
	}
	return first, indentLines(lines[1:], col), nil
}

// renderItem renders want as a sequence item whose "-" is at column col:
// the first line, starting with "-", and the following lines, indented.
func (ed *editor) renderItem(path []string, col int, want any, old *yaml.Node) (string, []string, error) {
	node, err := peopleNode(path, want)
	if err != nil {
		return "", nil, err
	}
	wrap := func(n *yaml.Node) *yaml.Node {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{n}}
		nameFirstInLists(seq)
		return seq
	}
	lines, err := ed.styledLines(wrap, node, old)
	if err != nil {
		return "", nil, err
	}
	return lines[0], indentLines(lines[1:], col), nil
}

// renderNewPair renders key: want as whole lines at column col, each
// ending with the file's line break.
func (ed *editor) renderNewPair(path []string, col int, key string, want any) ([]byte, error) {
	node, err := peopleNode(path, want)
	if err != nil {
		return nil, err
	}
	lines, err := ed.lines(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{stringNode(key), node}})
	if err != nil {
		return nil, err
	}
	return ed.joinLines(indentLines(lines, col)), nil
}

// renderNewItem renders want as a sequence item at column col, as whole
// lines each ending with the file's line break.
func (ed *editor) renderNewItem(path []string, col int, want any) ([]byte, error) {
	first, rest, err := ed.renderItem(path, col, want, nil)
	if err != nil {
		return nil, err
	}
	return ed.joinLines(append([]string{strings.Repeat(" ", col) + first}, rest...)), nil
}

// renderScalar renders want as a scalar in the presentation of old when
// it fits on one line; ok is false when it does not.
func (ed *editor) renderScalar(want any, old *yaml.Node) (string, bool, error) {
	node, err := valueNode(want)
	if err != nil {
		return "", false, err
	}
	if node.Kind != yaml.ScalarNode {
		return "", false, nil
	}
	lines, err := ed.styledLines(func(n *yaml.Node) *yaml.Node { return n }, node, old)
	if err != nil {
		return "", false, err
	}
	if len(lines) != 1 || strings.HasPrefix(lines[0], "|") || strings.HasPrefix(lines[0], ">") {
		return "", false, nil
	}
	return lines[0], true, nil
}

// indentLines prefixes every non-empty line with col spaces.
func indentLines(lines []string, col int) []string {
	prefix := strings.Repeat(" ", col)
	out := make([]string, len(lines))
	for i, l := range lines {
		if l != "" {
			l = prefix + l
		}
		out[i] = l
	}
	return out
}

// joinLines joins lines, each followed by the file's line break.
func (ed *editor) joinLines(lines []string) []byte {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString(ed.eol)
	}
	return []byte(b.String())
}
