package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// errLayout is returned when the text does not have the shape the node
// tree promises (a position off its line, a missing ':' or '-'). The
// in-place editor then gives up and the caller falls back to rewriting the
// document.
var errLayout = errors.New("unexpected document layout")

// errNotBlockMapping is returned by the in-place editor for a document
// written in flow style ("{apiVersion: v1, ...}"): it is rewritten whole.
var errNotBlockMapping = fmt.Errorf("%w: the document is not a block mapping", errLayout)

// errExplicitKey is returned by the in-place editor for a document with
// an explicit key ("? key"), which it does not lay out: the document is
// rewritten whole.
var errExplicitKey = fmt.Errorf("%w: explicit mapping key", errLayout)

// errUnterminatedScalar is returned by the in-place editor when it would
// have to add a line break after a block scalar that ends the file without
// one, which would change the scalar: the document is rewritten whole.
var errUnterminatedScalar = fmt.Errorf("%w: block scalar at the end of a file without a final line break", errLayout)

// lineKind is what a line of a document is to the in-place editor.
type lineKind int

const (
	kindBlank   lineKind = iota // only spaces or tabs
	kindComment                 // a comment line
	kindContent                 // the start of a node, or a plain continuation
	kindInside                  // inside a block scalar, a multi-line quoted scalar or flow collection
)

// srcLine is one line of a document's text.
type srcLine struct {
	start  int // first byte (after a BOM on the first line)
	end    int // end of the text, before "\r\n" or "\n"
	next   int // start of the next line
	indent int // leading spaces
	kind   lineKind
	// keep is set on the last line of a block scalar with "+" chomping,
	// which takes in any blank line that comes to follow it.
	keep bool
}

// source is the text of one document with its lines indexed, so that the
// positions yaml.v3 reports (1-based line, column counted in characters)
// can be turned into byte offsets.
type source struct {
	text  []byte
	lines []srcLine
}

// newSource indexes text. Only "\n" breaks lines; text with other line
// breaks YAML knows (a lone "\r", NEL, LS, PS) is refused, because yaml.v3
// would number its lines differently.
func newSource(text []byte) (*source, error) {
	if hasForeignLineBreak(text) {
		return nil, fmt.Errorf("%w: line breaks other than LF and CRLF", errLayout)
	}
	src := &source{text: text}
	for start := 0; start < len(text); {
		next := len(text)
		if i := bytes.IndexByte(text[start:], '\n'); i >= 0 {
			next = start + i + 1
		}
		src.lines = append(src.lines, newLine(text, start, next))
		start = next
	}
	if len(src.lines) > 0 && bytes.HasPrefix(text, []byte("\uFEFF")) {
		src.lines[0] = newLine(text, len("\uFEFF"), src.lines[0].next)
	}
	return src, nil
}

// hasForeignLineBreak reports whether text has a line break other than
// "\n" and "\r\n".
func hasForeignLineBreak(text []byte) bool {
	at, _ := foreignLineBreak(text)
	return at >= 0
}

// foreignLineBreak returns the offset and name of the first line break
// other than "\n" and "\r\n" in text (a lone CR, NEL, LS or PS), or -1.
func foreignLineBreak(text []byte) (int, string) {
	at, name := -1, ""
	for i, c := range text {
		if c == '\r' && (i+1 == len(text) || text[i+1] != '\n') {
			at, name = i, "a lone CR"
			break
		}
	}
	for _, b := range []struct{ text, name string }{{"\u0085", "NEL"}, {"\u2028", "LS"}, {"\u2029", "PS"}} {
		if i := bytes.Index(text, []byte(b.text)); i >= 0 && (at < 0 || i < at) {
			at, name = i, b.name
		}
	}
	return at, name
}

// newLine classifies the line [start, next) of text.
func newLine(text []byte, start, next int) srcLine {
	end := next
	if end > start && text[end-1] == '\n' {
		end--
	}
	if end > start && text[end-1] == '\r' {
		end--
	}
	l := srcLine{start: start, end: end, next: next}
	for l.indent < end-start && text[start+l.indent] == ' ' {
		l.indent++
	}
	trimmed := bytes.TrimLeft(text[start:end], " \t")
	switch {
	case len(trimmed) == 0:
		l.kind = kindBlank
	case trimmed[0] == '#':
		l.kind = kindComment
	default:
		l.kind = kindContent
	}
	return l
}

// offset turns a yaml.v3 position (1-based line and column) into a byte
// offset.
func (s *source) offset(line, column int) (int, error) {
	if line < 1 || line > len(s.lines) || column < 1 {
		return 0, fmt.Errorf("%w: position %d:%d is outside the text", errLayout, line, column)
	}
	l := s.lines[line-1]
	off := l.start
	for range column - 1 {
		if off >= l.end {
			return 0, fmt.Errorf("%w: column %d is past the end of line %d", errLayout, column, line)
		}
		_, size := utf8.DecodeRune(s.text[off:l.end])
		off += size
	}
	return off, nil
}

// nodeStart is the byte offset of a node, past its tag when it has one.
// A plain scalar cannot start with "!", so one found there is a tag.
func (s *source) nodeStart(n *yaml.Node) (int, error) {
	off, err := s.offset(n.Line, n.Column)
	if err != nil {
		return 0, err
	}
	if n.Style&yaml.TaggedStyle == 0 && (off >= len(s.text) || s.text[off] != '!') {
		// yaml.v3 drops the non-specific tag "!", so look for it too.
		return off, nil
	}
	l := s.lines[n.Line-1]
	for off < l.end && s.text[off] != ' ' && s.text[off] != '\t' {
		off++
	}
	for off < l.end && (s.text[off] == ' ' || s.text[off] == '\t') {
		off++
	}
	return off, nil
}

// lineOf returns the index of the line holding offset off.
func (s *source) lineOf(off int) int {
	lo, hi := 0, len(s.lines)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s.lines[mid].start <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// isContent reports whether line i holds YAML content (not only blanks or
// a comment).
func (s *source) isContent(i int) bool {
	return s.lines[i].kind == kindContent || s.lines[i].kind == kindInside
}

// lastContent returns the last content line in [from, limit), or from.
func (s *source) lastContent(from, limit int) int {
	for i := min(limit, len(s.lines)) - 1; i > from; i-- {
		if s.isContent(i) {
			return i
		}
	}
	return from
}

// markInside marks the lines (first, last] as inside a multi-line node.
func (s *source) markInside(first, last int) {
	for i := first + 1; i <= last && i < len(s.lines); i++ {
		s.lines[i].kind = kindInside
	}
}

// commentAfter returns the comment ("# ...") that ends the line holding
// off, when only blanks come between off and it.
func (s *source) commentAfter(off int) string {
	l := s.lines[s.lineOf(off)]
	if off > l.end {
		return ""
	}
	rest := bytes.TrimSpace(s.text[off:l.end])
	if len(rest) == 0 || rest[0] != '#' {
		return ""
	}
	return string(rest)
}

// plainEnd returns where a plain scalar starting at off ends on line i:
// before a " #" comment, without trailing blanks.
func (s *source) plainEnd(off, i int) int {
	l := s.lines[i]
	end := l.end
	for j := max(off, l.start); j < l.end; j++ {
		if s.text[j] == '#' && j > l.start && (s.text[j-1] == ' ' || s.text[j-1] == '\t') {
			end = j
			break
		}
	}
	for end > off && (s.text[end-1] == ' ' || s.text[end-1] == '\t') {
		end--
	}
	return end
}

// quotedEnd returns the offset just after the quoted scalar starting at
// off (which holds the opening quote).
func (s *source) quotedEnd(off int) (int, error) {
	if off >= len(s.text) {
		return 0, fmt.Errorf("%w: quoted scalar past the end", errLayout)
	}
	quote := s.text[off]
	for i := off + 1; i < len(s.text); i++ {
		switch {
		case quote == '"' && s.text[i] == '\\':
			i++
		case s.text[i] == quote && quote == '\'' && i+1 < len(s.text) && s.text[i+1] == '\'':
			i++
		case s.text[i] == quote:
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated quoted scalar", errLayout)
}

// flowEnd returns the offset just after the flow collection starting at
// off (which holds '[' or '{').
func (s *source) flowEnd(off int) (int, error) {
	depth := 0
	for i := off; i < len(s.text); i++ {
		c := s.text[i]
		switch {
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		case (c == '"' || c == '\'') && startsToken(s.text, i):
			end, err := s.quotedEnd(i)
			if err != nil {
				return 0, err
			}
			i = end - 1
		case c == '#' && i > 0 && isBlankOrBreak(s.text[i-1]):
			for i < len(s.text) && s.text[i] != '\n' {
				i++
			}
		}
	}
	return 0, fmt.Errorf("%w: unterminated flow collection", errLayout)
}

// startsToken reports whether a quote at i opens a quoted scalar inside a
// flow collection rather than being part of a plain one ("don't").
func startsToken(text []byte, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch text[j] {
		case ' ', '\t', '\r', '\n':
			continue
		case '[', '{', ',', ':', '?':
			return true
		default:
			return false
		}
	}
	return true
}

// isBlankOrBreak reports whether c is a space, tab or line break.
func isBlankOrBreak(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// blockHeader is the indicator line of a literal or folded scalar.
type blockHeader struct {
	end    int  // offset after the indicators
	keep   bool // "+" chomping: trailing blank lines are content
	indent int  // explicit indentation indicator, 0 when auto-detected
}

// parseBlockHeader reads the "|", ">" indicator and its modifiers at off.
func (s *source) parseBlockHeader(off int) (blockHeader, error) {
	if off >= len(s.text) || s.text[off] != '|' && s.text[off] != '>' {
		return blockHeader{}, fmt.Errorf("%w: block scalar without indicator", errLayout)
	}
	h := blockHeader{end: off + 1}
	for h.end < len(s.text) {
		c := s.text[h.end]
		switch {
		case c == '+':
			h.keep = true
		case c == '-':
		case c >= '1' && c <= '9':
			h.indent = int(c - '0')
		default:
			return h, nil
		}
		h.end++
	}
	return h, nil
}

// blockScalarEnd returns the last line of the block scalar whose header
// is at off, inside a block collection indented parentCol (-1 at the top),
// and whether it keeps its trailing line breaks.
func (s *source) blockScalarEnd(off, parentCol int) (int, bool, error) {
	h, err := s.parseBlockHeader(off)
	if err != nil {
		return 0, false, err
	}
	first := s.lineOf(off)
	want := 0
	if h.indent > 0 {
		want = max(parentCol, 0) + h.indent
	}
	last, lastBlank := first, first
	for i := first + 1; i < len(s.lines); i++ {
		l := s.lines[i]
		if l.end == l.start+l.indent {
			lastBlank = i
			continue
		}
		if want == 0 {
			if l.indent <= parentCol {
				break
			}
			want = l.indent
		}
		if l.indent < want {
			break
		}
		last, lastBlank = i, i
	}
	if h.keep {
		return lastBlank, true, nil
	}
	return last, false, nil
}

// markNode marks the lines inside the multi-line scalars and flow
// collections of the tree under n, so that block-scalar lines that look
// like comments or blank lines are not taken for them. parentCol is the
// column of the enclosing block collection (-1 at the top).
func (s *source) markNode(n *yaml.Node, parentCol int) error {
	switch {
	case n.Kind == yaml.ScalarNode:
		return s.markScalar(n, parentCol)
	case n.Style&yaml.FlowStyle != 0:
		start, err := s.nodeStart(n)
		if err != nil {
			return err
		}
		end, err := s.flowEnd(start)
		if err != nil {
			return err
		}
		s.markInside(s.lineOf(start), s.lineOf(end-1))
		return nil
	}
	col := n.Column - 1
	for _, child := range n.Content {
		if err := s.markNode(child, col); err != nil {
			return err
		}
	}
	return nil
}

// markScalar marks the lines of a multi-line quoted or block scalar.
func (s *source) markScalar(n *yaml.Node, parentCol int) error {
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		return nil
	}
	start, err := s.nodeStart(n)
	if err != nil {
		return err
	}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		last, keep, err := s.blockScalarEnd(start, parentCol)
		if err != nil {
			return err
		}
		s.markInside(s.lineOf(start), last)
		s.lines[last].keep = keep
		return nil
	}
	end, err := s.quotedEnd(start)
	if err != nil {
		return err
	}
	s.markInside(s.lineOf(start), s.lineOf(end-1))
	return nil
}
