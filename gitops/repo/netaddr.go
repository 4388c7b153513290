package repo

import "strings"

// hideSourceAddrs drops the local address of each "<net> <local>-><remote>" in msg, as Go's
// network errors read ("read tcp 10.0.0.5:41234->1.2.3.4:443: connection reset by peer"):
// its port is new at every connection, and the message reaches status, where a message that
// changed requeues the object at once, past its backoff.
func hideSourceAddrs(msg string) string {
	var b strings.Builder
	for {
		arrow := strings.Index(msg, "->")
		if arrow < 0 {
			b.WriteString(msg)
			return b.String()
		}
		local := strings.LastIndexByte(msg[:arrow], ' ') + 1
		if local > 0 && local < arrow && isNetwork(lastWord(msg[:local])) {
			b.WriteString(msg[:local])
		} else {
			b.WriteString(msg[:arrow+2])
		}
		msg = msg[arrow+2:]
	}
}

// lastWord is the last space-separated word of s.
func lastWord(s string) string {
	s = strings.TrimRight(s, " ")
	return s[strings.LastIndexByte(s, ' ')+1:]
}

// isNetwork reports whether s names an IP network of Go's net package.
func isNetwork(s string) bool {
	switch s {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
		return true
	}
	return false
}
