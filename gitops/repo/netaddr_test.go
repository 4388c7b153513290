package repo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHideSourceAddrs(t *testing.T) {
	cases := []struct{ name, msg, want string }{
		{"drops the local address of a reset connection", "read tcp 10.244.1.7:41234->1.2.3.4:443: read: connection reset by peer",
			"read tcp 1.2.3.4:443: read: connection reset by peer"},
		{"drops it inside a DNS failure", "lookup git.example on 10.96.0.10:53: read udp 10.244.0.5:55019->10.96.0.10:53: i/o timeout",
			"lookup git.example on 10.96.0.10:53: read udp 10.96.0.10:53: i/o timeout"},
		{"drops an IPv6 one", "write tcp6 [fd00::5]:40000->[fd00::1]:22: broken pipe", "write tcp6 [fd00::1]:22: broken pipe"},
		{"leaves an arrow that is no connection alone", "ref main -> origin/main moved", "ref main -> origin/main moved"},
		{"leaves a message without one alone", "dial tcp 127.0.0.1:1: connect: connection refused", "dial tcp 127.0.0.1:1: connect: connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, hideSourceAddrs(tc.msg))
		})
	}
}
