package repo

import (
	"strings"
	"unicode"
)

// maxSaid bounds what is kept of the server's messages during a push: a hook that prints
// a lot must not grow the error that reaches status.
const maxSaid = 4 << 10

// serverMessages keeps the first maxSaid bytes of the messages the server sends during a
// push (side band 2: its hooks' output, such as the rule a declined commit broke).
type serverMessages struct{ b []byte }

func (m *serverMessages) Write(p []byte) (int, error) {
	if room := maxSaid - len(m.b); room > 0 {
		m.b = append(m.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// serverSaid turns the server's messages into one line for an error: " (the server said:
// a; b)", or "" when it said nothing. Lines a progress meter redraws (ending in a carriage
// return) keep their last state; control characters are dropped, so a hook cannot forge
// lines of a log or status. Commit hashes read "<commit>": the writer commits again, with a
// new hash, at every attempt, and a status whose message changed requeues its GitTarget at
// once, past its backoff.
func serverSaid(raw []byte) string {
	var lines []string
	for _, line := range strings.Split(string(raw), "\n") {
		if i := strings.LastIndexByte(strings.TrimRight(line, "\r"), '\r'); i >= 0 {
			line = line[i+1:]
		}
		line = strings.TrimSpace(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return -1
			}
			return r
		}, line))
		line = hideHashes(line)
		if line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return " (the server said: " + strings.Join(lines, "; ") + ")"
}

// hideHashes replaces each word of 7 to 40 lower-case hex digits, with a digit among them
// (not a word such as "defaced"), by "<commit>", and each Gerrit Change-Id ("I" and 40 hex
// digits, computed from the commit) by "<change-id>".
func hideHashes(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		j := i
		for j < len(line) && isWordByte(line[j]) {
			j++
		}
		if j == i {
			b.WriteByte(line[i])
			i++
			continue
		}
		word := line[i:j]
		switch {
		case len(word) >= 7 && len(word) <= 40 && isHex(word) && strings.ContainsAny(word, "0123456789"):
			word = "<commit>"
		case len(word) == 41 && word[0] == 'I' && isHex(word[1:]):
			word = "<change-id>"
		}
		b.WriteString(word)
		i = j
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isHex(s string) bool { return strings.Trim(s, "0123456789abcdef") == "" }
