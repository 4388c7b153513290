package manifest

import (
	"bytes"
)

// lineClass is what one physical line means to the document splitter.
type lineClass int

const (
	lineBlank     lineClass = iota // only spaces/tabs
	lineComment                    // first non-blank character is '#'
	lineDirective                  // '%' at column 0 (%YAML, %TAG)
	lineDocStart                   // "---" at column 0, then end of line or blank
	lineDocEnd                     // "..." at column 0, then end of line or blank
	lineContent                    // anything else
)

// line is one physical line of a file: [start, end) includes its line break.
type line struct {
	start, end int
	number     int // 1-based
	class      lineClass
	// inline is set for a "---" line that carries document content after the
	// marker ("--- !!map", "--- |"); such a line belongs to the body.
	inline bool
}

// segment is the byte range of one document in a file, cut at document
// markers. Segments tile the file: concatenating them gives the file back,
// which is what lets edits keep every other document byte-identical.
//
// Layout of one segment, each part possibly empty:
//
//	lead   [start, sepStart)      comments/directives before "---" (or before
//	                              the first content line when there is no "---")
//	sep    [sepStart, sepEnd)     the "---" line
//	head   [sepEnd, bodyStart)    comments and blank lines before the content
//	body   [bodyStart, bodyEnd)   first to last content line
//	tail   [bodyEnd, end)         trailing comments, the "..." line, and
//	                              comments after it
type segment struct {
	start, end         int
	sepStart, sepEnd   int
	bodyStart, bodyEnd int
	endMarker          int // start of the "..." line, or -1
	hasSep             bool
	inline             bool
	hasBody            bool
	startLine          int // 1-based line of start
	firstLine          int // 1-based line of the "---" or of the first content line
}

// isDocument reports whether the segment is a YAML document: it has a
// "---" marker or content. A segment with neither holds only comments,
// blank lines or markers and is not counted (yaml.v3 does not count it
// either).
func (s segment) isDocument() bool { return s.hasSep || s.hasBody }

// leadEnd is where the segment's leading comment block ends.
func (s segment) leadEnd() int {
	if s.hasSep {
		return s.sepStart
	}
	if s.hasBody {
		return s.bodyStart
	}
	return s.end
}

// ended reports whether the segment was closed by a "..." marker, after
// which anything but comments belongs to another document.
func (s segment) ended() bool { return s.endMarker >= 0 }

// splitLines cuts content into physical lines and classifies them. Only
// "\n" breaks lines; a "\r" before it counts as trailing blank.
func splitLines(content []byte) []line {
	var lines []line
	for start, number := 0, 1; start < len(content); number++ {
		end := len(content)
		if i := bytes.IndexByte(content[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		text := bytes.TrimRight(content[start:end], "\r\n")
		if start == 0 {
			text = bytes.TrimPrefix(text, []byte("\uFEFF"))
		}
		class, inline := classify(text)
		lines = append(lines, line{start: start, end: end, number: number, class: class, inline: inline})
		start = end
	}
	return lines
}

// classify tells what one line (without its line break) is.
func classify(text []byte) (lineClass, bool) {
	switch {
	case isMarker(text, "---"):
		rest := bytes.TrimLeft(text[3:], " \t")
		return lineDocStart, len(rest) > 0 && rest[0] != '#'
	case isMarker(text, "..."):
		return lineDocEnd, false
	}
	trimmed := bytes.TrimLeft(text, " \t")
	switch {
	case len(trimmed) == 0:
		return lineBlank, false
	case trimmed[0] == '#':
		return lineComment, false
	case text[0] == '%':
		return lineDirective, false
	default:
		return lineContent, false
	}
}

// isMarker reports whether text starts with a document marker at column 0.
// YAML forbids such a line inside any scalar, so a column-0 marker always
// separates documents, even in the middle of what looks like a block scalar.
func isMarker(text []byte, marker string) bool {
	if !bytes.HasPrefix(text, []byte(marker)) {
		return false
	}
	return len(text) == len(marker) || text[len(marker)] == ' ' || text[len(marker)] == '\t'
}

// splitSegments cuts content into segments (see segment). Comments after a
// "..." marker belong to the next document when one follows ("---" or
// content), and to the ended document at the end of the file.
func splitSegments(content []byte) []segment {
	var segments []segment
	cur := newSegment(0, 1)
	// pending is the first comment line after "..." whose owner is unknown.
	var pending *line

	startNew := func(l line) {
		if pending != nil {
			l = *pending
		}
		segments = append(segments, cur.closeAt(l.start))
		cur = newSegment(l.start, l.number)
		pending = nil
	}

	for _, l := range splitLines(content) {
		switch l.class {
		case lineDocStart:
			if cur.hasSep || cur.hasBody || cur.ended() {
				startNew(l)
			}
			cur.hasSep, cur.sepStart, cur.sepEnd = true, l.start, l.end
			cur.firstLine = l.number
			if l.inline {
				cur.inline = true
				cur.addContent(l)
			}
		case lineDocEnd:
			if !cur.ended() {
				cur.endMarker = l.start
			}
			pending = nil
		case lineContent:
			if cur.ended() {
				startNew(l)
			}
			cur.addContent(l)
		default:
			if cur.ended() && pending == nil {
				pending = &l
			}
		}
	}
	return append(segments, cur.closeAt(len(content)))
}

// newSegment starts an empty segment at offset start, on line number.
func newSegment(start, number int) segment {
	return segment{
		start: start, end: start, startLine: number,
		sepStart: start, sepEnd: start,
		bodyStart: start, bodyEnd: start,
		endMarker: -1,
	}
}

// addContent extends the body to include l.
func (s *segment) addContent(l line) {
	if !s.hasBody {
		s.hasBody = true
		s.bodyStart = l.start
		if !s.hasSep {
			s.sepStart, s.sepEnd = l.start, l.start
			s.firstLine = l.number
		}
	}
	s.bodyEnd = l.end
}

// closeAt ends the segment at offset end and fixes up the empty parts so
// that every range lies within [start, end).
func (s segment) closeAt(end int) segment {
	s.end = end
	if !s.hasSep && !s.hasBody {
		s.sepStart, s.sepEnd = end, end
	}
	if !s.hasBody {
		bodyAt := s.sepEnd
		if s.ended() {
			bodyAt = min(bodyAt, s.endMarker)
		}
		s.bodyStart, s.bodyEnd = bodyAt, bodyAt
	}
	return s
}
