package manifest

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// editor edits one document in place: it walks the document's node tree
// (which knows where every key and item starts) alongside the object it
// must come to represent, and replaces only the text of what differs,
// re-encoding the smallest changed values with yaml.v3. Everything else,
// comments, blank lines, quoting, block scalars and key order included,
// stays byte-for-byte.
type editor struct {
	src   *source
	style Style
	eol   string
	// quoteMultiline writes new strings double-quoted where they would
	// otherwise be block scalars, for when a block scalar would take in the
	// comment or blank lines that follow it.
	quoteMultiline bool
}

// edit replaces text[start:end] with text.
type edit struct {
	start, end int
	text       []byte
}

// editInPlace returns text (one document, from its first content line to
// the end of its trailing comments) edited so that it reads as want, old
// being what it reads as now. style is used for new block sequences and
// eol for new lines. Text without a final line break gets one. With
// quoteMultiline, new strings are never block scalars.
func editInPlace(text []byte, old, want any, style Style, eol string, quoteMultiline bool) ([]byte, error) {
	missingEOL := len(text) > 0 && text[len(text)-1] != '\n'
	if missingEOL {
		text = concat(text, []byte(eol))
	}
	src, root, err := parseForEdit(text)
	if err != nil {
		return nil, err
	}
	oldMap, okOld := old.(map[string]any)
	wantMap, okWant := want.(map[string]any)
	if !okOld || !okWant {
		return nil, fmt.Errorf("%w: the object is not a mapping", errLayout)
	}
	ed := &editor{src: src, style: style, eol: eol, quoteMultiline: quoteMultiline}
	edits, err := ed.editMapping(root, oldMap, wantMap, nil, len(src.lines), 0)
	if err != nil {
		return nil, err
	}
	if missingEOL && touchesUnterminatedScalar(src, edits) {
		return nil, errUnterminatedScalar
	}
	return applyEdits(text, 0, len(text), edits)
}

// parseForEdit indexes the lines of a document and parses it into the
// node tree of its root mapping, marking the lines inside multi-line
// scalars and flow collections.
func parseForEdit(text []byte) (*source, *yaml.Node, error) {
	src, err := newSource(text)
	if err != nil {
		return nil, nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, nil, fmt.Errorf("parsing the document: %w", err)
	}
	if len(doc.Content) != 1 || !isBlock(doc.Content[0], yaml.MappingNode) {
		return nil, nil, errNotBlockMapping
	}
	root := doc.Content[0]
	if err := src.markNode(root, -1); err != nil {
		return nil, nil, err
	}
	return src, root, nil
}

// touchesUnterminatedScalar reports whether edits change or follow the
// last line of a text that had no final line break, when that line ends a
// multi-line scalar: the line break the edit needs there would become
// part of the scalar's value.
func touchesUnterminatedScalar(src *source, edits []edit) bool {
	last := src.lines[len(src.lines)-1]
	if last.kind != kindInside {
		return false
	}
	for _, e := range edits {
		if e.end > last.start {
			return true
		}
	}
	return false
}

// editMapping edits a block mapping: changed values are edited
// recursively, keys the object no longer has are removed with their
// comments, and new keys are added after their siblings (before the first
// sibling that people write after them, in the top level and metadata).
func (ed *editor) editMapping(m *yaml.Node, old, want map[string]any, path []string, limit, minHead int) ([]edit, error) {
	b, err := layoutMapping(ed.src, m, limit, minHead)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(b.entries))
	nested := make([][]edit, len(b.entries))
	kept := make([]bool, len(b.entries))
	for i, e := range b.entries {
		if keys[i], err = resolveKey(e.key); err != nil {
			return nil, fmt.Errorf("%w: %w", errLayout, err)
		}
		w, ok := want[keys[i]]
		if !ok {
			continue
		}
		o, ok := old[keys[i]]
		if !ok {
			return nil, fmt.Errorf("%w: key %q is not in the parsed document", errLayout, keys[i])
		}
		kept[i] = true
		if nested[i], err = ed.editPair(e, o, w, childPath(path, keys[i])); err != nil {
			return nil, err
		}
	}
	added := addedKeys(want, keys, path)
	if len(added) == 0 && !slices.Contains(kept, false) {
		return slices.Concat(nested...), nil
	}
	pieces, err := ed.mappingPieces(b, keys, kept, added, want, path)
	if err != nil {
		return nil, err
	}
	return ed.rebuild(b, pieces, nested, kept)
}

// childPath returns path extended with key, without sharing path's array.
func childPath(path []string, key string) []string {
	return append(slices.Clip(path), key)
}

// addedKeys returns the keys of want that the mapping does not have yet, in
// the order they are written in: by rank, then by name.
func addedKeys(want map[string]any, existing []string, path []string) []string {
	present := make(map[string]bool, len(existing))
	for _, k := range existing {
		present[k] = true
	}
	var added []string
	for k := range want {
		if !present[k] {
			added = append(added, k)
		}
	}
	slices.SortFunc(added, func(a, b string) int {
		if d := keyRank(path, a) - keyRank(path, b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return added
}

// keyRank is the position people give key among its siblings in the
// mapping at path: the index in topLevelOrder or metadataOrder, or after
// them; every key of other mappings has the same rank.
func keyRank(path []string, key string) int {
	var order []string
	switch {
	case len(path) == 0:
		order = topLevelOrder()
	case len(path) == 1 && path[0] == "metadata":
		order = metadataOrder()
	}
	if i := slices.Index(order, key); i >= 0 {
		return i
	}
	return len(order)
}

// piece is one entry of a rebuilt block collection: an existing entry
// (old >= 0) or new text.
type piece struct {
	old  int
	text []byte
}

// mappingPieces lists the entries of an edited mapping: the kept ones in
// file order, each new key before the first kept key of higher rank.
func (ed *editor) mappingPieces(b *block, keys []string, kept []bool, added []string, want map[string]any, path []string) ([]piece, error) {
	var pieces []piece
	next := 0
	emitUntil := func(rank int) error {
		for ; next < len(added) && keyRank(path, added[next]) < rank; next++ {
			text, err := ed.renderNewPair(childPath(path, added[next]), b.entries[0].col, added[next], want[added[next]])
			if err != nil {
				return err
			}
			pieces = append(pieces, piece{old: -1, text: text})
		}
		return nil
	}
	for i := range b.entries {
		if !kept[i] {
			continue
		}
		if err := emitUntil(keyRank(path, keys[i])); err != nil {
			return nil, err
		}
		pieces = append(pieces, piece{old: i})
	}
	if err := emitUntil(math.MaxInt); err != nil {
		return nil, err
	}
	return pieces, nil
}

// editPair edits the value of one mapping entry.
func (ed *editor) editPair(e entry, old, want any, path []string) ([]edit, error) {
	if equalValues(old, want) {
		return nil, nil
	}
	if edits, ok, err := ed.editNested(e, old, want, path); ok || err != nil {
		return edits, err
	}
	return ed.replacePairValue(e, want, path)
}

// editItem edits one sequence item.
func (ed *editor) editItem(e entry, old, want any, path []string) ([]edit, error) {
	if equalValues(old, want) {
		return nil, nil
	}
	if edits, ok, err := ed.editNested(e, old, want, path); ok || err != nil {
		return edits, err
	}
	return ed.replaceItem(e, want, path)
}

// editNested edits an entry's value without replacing it: a block
// collection that stays a non-empty collection of the same kind is edited
// entry by entry, a scalar that stays a one-line scalar is replaced where
// it stands. ok is false when the value must be replaced.
func (ed *editor) editNested(e entry, old, want any, path []string) ([]edit, bool, error) {
	v := e.value
	oldMap, oldIsMap := old.(map[string]any)
	wantMap, wantIsMap := want.(map[string]any)
	oldList, oldIsList := old.([]any)
	wantList, wantIsList := want.([]any)
	switch {
	case isBlock(v, yaml.MappingNode) && oldIsMap && wantIsMap && len(wantMap) > 0:
		edits, err := ed.editMapping(v, oldMap, wantMap, path, e.limit, e.line+1)
		return edits, true, err
	case isBlock(v, yaml.SequenceNode) && oldIsList && wantIsList && len(wantList) > 0:
		edits, err := ed.editSequence(v, oldList, wantList, path, e.limit, e.line+1)
		return edits, true, err
	case v.Kind == yaml.ScalarNode && !isEmptyNull(v) && isScalarValue(want):
		return ed.replaceScalar(e, want)
	}
	return nil, false, nil
}

// isBlock reports whether n is a block (not flow) node of kind.
func isBlock(n *yaml.Node, kind yaml.Kind) bool {
	return n.Kind == kind && n.Style&yaml.FlowStyle == 0
}

// isScalarValue reports whether a JSON-like value is a scalar.
func isScalarValue(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// editSequence edits a block sequence: items are matched (see
// matchItems), matched items are edited in place, removed ones leave with
// their comments, new ones are inserted where the object has them, and
// the items are put in the object's order.
func (ed *editor) editSequence(s *yaml.Node, old, want []any, path []string, limit, minHead int) ([]edit, error) {
	b, err := layoutSequence(ed.src, s, limit, minHead)
	if err != nil {
		return nil, err
	}
	if len(b.entries) != len(old) {
		return nil, fmt.Errorf("%w: %d items in the text, %d parsed", errLayout, len(b.entries), len(old))
	}
	match := matchItems(old, want)
	nested := make([][]edit, len(b.entries))
	kept := make([]bool, len(b.entries))
	itemPath := childPath(path, "[]")
	for i, j := range match {
		if j < 0 {
			continue
		}
		kept[j] = true
		if nested[j], err = ed.editItem(b.entries[j], old[j], want[i], itemPath); err != nil {
			return nil, err
		}
	}
	if isIdentity(match, len(old)) {
		return slices.Concat(nested...), nil
	}
	pieces := make([]piece, len(match))
	for i, j := range match {
		pieces[i] = piece{old: j}
		if j < 0 {
			if pieces[i].text, err = ed.renderNewItem(itemPath, b.entries[0].col, want[i]); err != nil {
				return nil, err
			}
		}
	}
	return ed.rebuild(b, pieces, nested, kept)
}

// isIdentity reports whether match keeps all n items in place.
func isIdentity(match []int, n int) bool {
	if len(match) != n {
		return false
	}
	for i, j := range match {
		if i != j {
			return false
		}
	}
	return true
}

// replaceScalar replaces a one-line scalar with the one-line rendering of
// want, in the old one's quoting where possible, keeping what surrounds it
// on the line (a comment). ok is false when either is not one line.
func (ed *editor) replaceScalar(e entry, want any) ([]edit, bool, error) {
	v := e.value
	if v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return nil, false, nil
	}
	start, err := ed.src.nodeStart(v)
	if err != nil {
		return nil, false, err
	}
	end, err := ed.scalarEnd(v, start, e.coreEnd)
	if err != nil {
		return nil, false, err
	}
	if ed.src.lineOf(start) != ed.src.lineOf(end) {
		return nil, false, nil
	}
	text, ok, err := ed.renderScalar(want, v)
	if err != nil || !ok {
		return nil, false, err
	}
	return []edit{{start: start, end: end, text: []byte(text)}}, true, nil
}

// scalarEnd returns the offset just after a flow scalar (plain or quoted)
// starting at start, whose entry's content ends on line coreEnd.
func (ed *editor) scalarEnd(v *yaml.Node, start, coreEnd int) (int, error) {
	if v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		return ed.src.quotedEnd(start)
	}
	from := start
	if ed.src.lineOf(start) != coreEnd {
		from = ed.src.lines[coreEnd].start
	}
	return ed.src.plainEnd(from, coreEnd), nil
}

// valueEnd returns the offset just after a scalar or flow collection that
// starts on the entry's lines, or -1 for block collections, block scalars
// and empty values (which end with their entry's last line).
func (ed *editor) valueEnd(e entry) (int, error) {
	v := e.value
	if isEmptyNull(v) || isBlock(v, yaml.MappingNode) || isBlock(v, yaml.SequenceNode) || v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return -1, nil
	}
	start, err := ed.src.nodeStart(v)
	if err != nil {
		return 0, err
	}
	if v.Kind != yaml.ScalarNode {
		return ed.src.flowEnd(start)
	}
	return ed.scalarEnd(v, start, e.coreEnd)
}

// valueComment returns the comment on the line of an entry's key or dash
// that belongs to the entry as a whole ("replicas: 3 # set by HPA",
// "env: # from the chart"), to keep when its value is rewritten.
func (ed *editor) valueComment(e entry) string {
	v := e.value
	if v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		start, err := ed.src.nodeStart(v)
		if err != nil {
			return ""
		}
		h, err := ed.src.parseBlockHeader(start)
		if err != nil {
			return ""
		}
		return ed.src.commentAfter(h.end)
	}
	end, err := ed.valueEnd(e)
	switch {
	case err != nil:
		return ""
	case end < 0:
		return ed.src.commentAfter(e.indicatorEnd)
	}
	if c := ed.src.commentAfter(end); c != "" {
		return c
	}
	if ed.src.lineOf(end) > e.line {
		return ed.src.commentAfter(e.indicatorEnd)
	}
	return ""
}

// replacePairValue replaces everything after a key's ':' up to the end of
// its entry's content with a rendering of want, keeping the key as written
// and its comment.
func (ed *editor) replacePairValue(e entry, want any, path []string) ([]edit, error) {
	first, rest, err := ed.renderPairValue(path, e.col, want, e.value)
	if err != nil {
		return nil, err
	}
	return []edit{{start: e.indicatorEnd, end: ed.src.lines[e.coreEnd].end, text: ed.withComment(first, ed.valueComment(e), rest)}}, nil
}

// replaceItem replaces a sequence item, from its dash to the end of its
// content, with a rendering of want, keeping its comment.
func (ed *editor) replaceItem(e entry, want any, path []string) ([]edit, error) {
	first, rest, err := ed.renderItem(path, e.col, want, e.value)
	if err != nil {
		return nil, err
	}
	return []edit{{start: e.start, end: ed.src.lines[e.coreEnd].end, text: ed.withComment(first, ed.valueComment(e), rest)}}, nil
}

// withComment joins a rendered first line, a comment to end it with, and
// the following lines.
func (ed *editor) withComment(first, comment string, rest []string) []byte {
	var b strings.Builder
	b.WriteString(first)
	if comment != "" {
		if !strings.HasSuffix(first, " ") {
			b.WriteString(" ")
		}
		b.WriteString(comment)
	}
	for _, l := range rest {
		b.WriteString(ed.eol)
		b.WriteString(l)
	}
	return []byte(b.String())
}

// rebuild rewrites a block collection whose entries were removed, added
// or reordered: pieces lists the entries in their new order. Each kept
// entry keeps its text (with its own nested edits), its head and foot
// comments; the blank lines and comments between entries stay in place,
// and new entries are separated like the existing ones when those are all
// separated by blank lines.
func (ed *editor) rebuild(b *block, pieces []piece, nested [][]edit, kept []bool) ([]edit, error) {
	src := ed.src
	n := len(b.entries)
	gap := func(i int) []byte { return src.text[b.chunkEnd(src, i):b.chunkStart(src, i+1)] }
	var keptGaps [][]byte
	for j, prev := 0, -1; j < n; j++ {
		if !kept[j] {
			continue
		}
		if prev >= 0 {
			keptGaps = append(keptGaps, carriedGap(gap, prev, j))
		}
		prev = j
	}
	defaultGap := ed.defaultGap(b, gap)
	var out []byte
	gapIndex, seenKept, keep := 0, false, false
	for k, p := range pieces {
		text, spilled := p.text, false
		if p.old >= 0 {
			var err error
			if text, spilled, err = ed.chunk(b, p.old, nested[p.old]); err != nil {
				return nil, err
			}
		}
		var sep []byte
		switch {
		case k == 0:
		case p.old >= 0 && seenKept && gapIndex < len(keptGaps):
			sep = keptGaps[gapIndex]
			gapIndex++
		default:
			sep = defaultGap
		}
		if keep {
			sep = trimBlankLines(sep)
		}
		out = append(append(out, sep...), text...)
		seenKept = seenKept || p.old >= 0
		keep = p.old >= 0 && (spilled || ed.endsWithKeep(b, p.old))
	}
	if b.midLine {
		out = stripFirstIndent(out)
	}
	end := b.chunkEnd(src, n-1)
	if keep {
		end = ed.afterBlankLines(end)
	}
	return []edit{{start: b.chunkStart(src, 0), end: end, text: out}}, nil
}

// carriedGap is the separator before kept entry j, whose previous kept entry is prev: the
// gap just before j, after those of the entries removed between them that hold comments.
// A comment set apart from a removed entry by a blank line (a section's heading) is not
// that entry's own: a stray comment rather than a lost one. Pure.
func carriedGap(gap func(int) []byte, prev, j int) []byte {
	var sep []byte
	for i := prev; i < j-1; i++ {
		if holdsComment(gap(i)) {
			sep = append(sep, gap(i)...)
		}
	}
	return append(sep, gap(j-1)...)
}

// holdsComment says whether text has a comment line. Pure.
func holdsComment(text []byte) bool {
	for _, line := range bytes.Split(text, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			return true
		}
	}
	return false
}

// endsWithKeep reports whether entry i ends with a block scalar that keeps
// its trailing line breaks: blank lines placed after it would join it.
func (ed *editor) endsWithKeep(b *block, i int) bool {
	e := b.entries[i]
	return e.footEnd == e.coreEnd && ed.src.lines[e.coreEnd].keep
}

// trimBlankLines drops the blank lines at the start of text.
func trimBlankLines(text []byte) []byte {
	for {
		i := bytes.IndexByte(text, '\n')
		if i < 0 || len(bytes.TrimSpace(text[:i])) != 0 {
			return text
		}
		text = text[i+1:]
	}
}

// afterBlankLines returns the offset after the blank lines starting at off.
func (ed *editor) afterBlankLines(off int) int {
	return off + len(ed.src.text[off:]) - len(trimBlankLines(ed.src.text[off:]))
}

// chunk returns entry i's text with its nested edits applied, as whole
// lines (the first entry of a collection that starts mid-line gets the
// indentation it would have on a line of its own). A nested edit that
// also removed the blank lines after the entry (see rebuild) is cut back
// to the entry; spilled tells the caller to drop those blank lines itself.
func (ed *editor) chunk(b *block, i int, edits []edit) (text []byte, spilled bool, err error) {
	from, to := b.chunkStart(ed.src, i), b.chunkEnd(ed.src, i)
	clipped := make([]edit, len(edits))
	for j, e := range edits {
		if e.end > to && len(bytes.TrimSpace(ed.src.text[max(e.start, to):e.end])) == 0 {
			e.end, spilled = max(e.start, to), true
		}
		clipped[j] = e
	}
	if text, err = applyEdits(ed.src.text, from, to, clipped); err != nil {
		return nil, false, err
	}
	if i == 0 && b.midLine {
		text = concat([]byte(strings.Repeat(" ", b.entries[0].col)), text)
	}
	return text, spilled, nil
}

// defaultGap is what separates a new entry from its neighbours: the blank
// lines that separate every pair of existing entries, when they all are
// separated by blank lines only, and nothing otherwise.
func (ed *editor) defaultGap(b *block, gap func(int) []byte) []byte {
	var last []byte
	for i := 0; i+1 < len(b.entries); i++ {
		g := gap(i)
		if len(g) == 0 || len(bytes.TrimSpace(g)) != 0 {
			return nil
		}
		last = g
	}
	return last
}

// stripFirstIndent drops the indentation of the first line of a collection that starts
// mid-line (after a list item's "- "): its first entry, or a comment line above it, which
// then follows the dash as "- # comment" does, the entry below it at its indentation.
// Other lines stay as they are.
func stripFirstIndent(text []byte) []byte {
	return bytes.TrimLeft(text, " \t")
}

// applyEdits returns text[from:to] with edits applied. Edits must lie
// within the range and not overlap.
func applyEdits(text []byte, from, to int, edits []edit) ([]byte, error) {
	sorted := slices.Clone(edits)
	slices.SortStableFunc(sorted, func(a, b edit) int { return a.start - b.start })
	var out []byte
	at := from
	for _, e := range sorted {
		if e.start < at || e.end < e.start || e.end > to {
			return nil, fmt.Errorf("%w: overlapping edits at offset %d", errLayout, e.start)
		}
		out = append(out, text[at:e.start]...)
		out = append(out, e.text...)
		at = e.end
	}
	return append(out, text[at:to]...), nil
}
