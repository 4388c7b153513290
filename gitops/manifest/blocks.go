package manifest

import (
	"bytes"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// entry is one key/value pair of a block mapping, or one item of a block
// sequence, with the lines it owns. Lines are 0-based indexes into
// source.lines.
type entry struct {
	key   *yaml.Node // nil for a sequence item
	value *yaml.Node
	// line is where the key or the item's "-" is; start its byte offset.
	line, start int
	// col is the column of the key or the "-".
	col int
	// indicatorEnd is the offset just after the key's ':' or the item's '-'.
	indicatorEnd int
	// coreEnd is the last line holding the entry's content.
	coreEnd int
	// head is the first of the comment lines directly above line (its head
	// comment), or line itself.
	head int
	// footEnd is the last of the comment lines directly below coreEnd that
	// are indented deeper than col (its foot comment), or coreEnd.
	footEnd int
	// limit is the line where whatever follows the entry begins.
	limit int
}

// block is a block mapping or sequence laid out on lines.
type block struct {
	entries []entry
	// midLine is set when the first entry starts after other text on its
	// line ("- name: a": the mapping starts after the dash).
	midLine bool
}

// chunkStart is the offset where entry i's text (head comments included)
// begins.
func (b *block) chunkStart(src *source, i int) int {
	if i == 0 && b.midLine {
		return b.entries[0].start
	}
	return src.lines[b.entries[i].head].start
}

// chunkEnd is the offset just after entry i's text (foot comments and
// line break included).
func (b *block) chunkEnd(src *source, i int) int {
	return src.lines[b.entries[i].footEnd].next
}

// layoutMapping lays out the pairs of a block mapping whose last pair ends
// before line limit; head comments of the first pair start at or after
// line minHead.
func layoutMapping(src *source, m *yaml.Node, limit, minHead int) (*block, error) {
	b := &block{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		key := m.Content[i]
		start, err := src.offset(key.Line, key.Column)
		if err != nil {
			return nil, err
		}
		indicatorEnd, err := keyIndicatorEnd(src, key, start)
		if err != nil {
			return nil, err
		}
		b.entries = append(b.entries, entry{
			key: key, value: m.Content[i+1],
			line: key.Line - 1, start: start, col: key.Column - 1, indicatorEnd: indicatorEnd,
		})
	}
	if err := b.finish(src, limit, minHead); err != nil {
		return nil, err
	}
	return b, checkValuesInPlace(b)
}

// layoutSequence lays out the items of a block sequence, like
// layoutMapping. Items are found by their '-' at the sequence's column.
func layoutSequence(src *source, s *yaml.Node, limit, minHead int) (*block, error) {
	b := &block{}
	col := s.Column - 1
	line := s.Line - 1
	for i, item := range s.Content {
		if i > 0 {
			next, err := nextDash(src, line+1, limit, col)
			if err != nil {
				return nil, err
			}
			line = next
		}
		start, err := dashOffset(src, line, col)
		if err != nil {
			return nil, err
		}
		b.entries = append(b.entries, entry{value: item, line: line, start: start, col: col, indicatorEnd: start + 1})
	}
	if err := b.finish(src, limit, minHead); err != nil {
		return nil, err
	}
	return b, checkValuesInPlace(b)
}

// nextDash finds the next line in [from, limit) starting with "-" at col.
func nextDash(src *source, from, limit, col int) (int, error) {
	for i := from; i < min(limit, len(src.lines)); i++ {
		l := src.lines[i]
		if l.kind != kindContent || l.indent != col {
			continue
		}
		if isDash(src.text, l.start+col, l.end) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: sequence item not found after line %d", errLayout, from)
}

// dashOffset returns the offset of the "-" at column col of line i.
func dashOffset(src *source, i, col int) (int, error) {
	off, err := src.offset(i+1, col+1)
	if err != nil {
		return 0, err
	}
	if !isDash(src.text, off, src.lines[i].end) {
		return 0, fmt.Errorf("%w: no sequence indicator at line %d", errLayout, i+1)
	}
	return off, nil
}

// isDash reports whether text at off is a sequence entry indicator.
func isDash(text []byte, off, end int) bool {
	return off < end && text[off] == '-' && (off+1 == end || text[off+1] == ' ' || text[off+1] == '\t')
}

// checkValuesInPlace checks that every value lies within its entry's
// lines, which guards the layout against surprises.
func checkValuesInPlace(b *block) error {
	for _, e := range b.entries {
		if isEmptyNull(e.value) {
			continue
		}
		if line := e.value.Line - 1; line < e.line || line > e.coreEnd {
			return fmt.Errorf("%w: value at line %d is outside its entry", errLayout, e.value.Line)
		}
	}
	return nil
}

// finish computes the lines every entry owns.
func (b *block) finish(src *source, limit, minHead int) error {
	if len(b.entries) == 0 {
		return fmt.Errorf("%w: empty block collection", errLayout)
	}
	first := b.entries[0]
	l := src.lines[first.line]
	b.midLine = first.start > l.start+l.indent
	for i := range b.entries {
		e := &b.entries[i]
		e.limit = limit
		if i+1 < len(b.entries) {
			e.limit = b.entries[i+1].line
		}
		if e.limit <= e.line {
			return fmt.Errorf("%w: entries out of order at line %d", errLayout, e.line+1)
		}
		e.coreEnd = src.lastContent(e.line, e.limit)
		e.footEnd = footEnd(src, e.coreEnd, e.limit, e.col)
		lower := minHead
		if i > 0 {
			lower = b.entries[i-1].footEnd + 1
		}
		e.head = e.line
		if i > 0 || !b.midLine {
			e.head = headStart(src, e.line, lower)
		}
	}
	return nil
}

// footEnd returns the last comment line directly below coreEnd (before
// limit) indented deeper than col, or coreEnd.
func footEnd(src *source, coreEnd, limit, col int) int {
	end := coreEnd
	for i := coreEnd + 1; i < min(limit, len(src.lines)); i++ {
		l := src.lines[i]
		if l.kind != kindComment || l.indent <= col {
			break
		}
		end = i
	}
	return end
}

// headStart returns the first of the comment lines directly above line
// (not above lower), or line.
func headStart(src *source, line, lower int) int {
	head := line
	for head-1 >= lower && head-1 >= 0 && src.lines[head-1].kind == kindComment {
		head--
	}
	return head
}

// keyIndicatorEnd returns the offset just after the ':' that follows a
// simple key starting at start.
func keyIndicatorEnd(src *source, key *yaml.Node, start int) (int, error) {
	l := src.lines[key.Line-1]
	i := start
	if key.Style&yaml.TaggedStyle != 0 {
		var err error
		if i, err = src.nodeStart(key); err != nil {
			return 0, err
		}
	}
	if i < l.end && (src.text[i] == '"' || src.text[i] == '\'') {
		end, err := src.quotedEnd(i)
		if err != nil {
			return 0, err
		}
		i = end
	}
	for ; i < l.end; i++ {
		if src.text[i] == ':' && (i+1 == l.end || src.text[i+1] == ' ' || src.text[i+1] == '\t') {
			return i + 1, nil
		}
	}
	if prefix := bytes.TrimSpace(src.text[l.start:start]); bytes.HasSuffix(prefix, []byte("?")) {
		return 0, errExplicitKey
	}
	return 0, fmt.Errorf("%w: no ':' after the key at line %d", errLayout, key.Line)
}

// isEmptyNull reports whether a node is a null written as nothing at all
// ("key:" or "- "), which has no position of its own.
func isEmptyNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "" && n.Style == 0 && n.Tag == "!!null"
}
