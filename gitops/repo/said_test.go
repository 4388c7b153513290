package repo

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerSaid(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want string
	}{
		{"says nothing when the server said nothing", "", ""},
		{"says nothing for blank lines", "\n \r\n", ""},
		{"joins a hook's lines", "GH013: Repository rule violations found\n- Secret detected in live/app.yaml\n",
			" (the server said: GH013: Repository rule violations found; - Secret detected in live/app.yaml)"},
		{"keeps the last state of a redrawn line", "Checking 10%\rChecking 100%\r\ndone\n", " (the server said: Checking 100%; done)"},
		{"hides commit hashes, new at every attempt", "commit: 3f2a9c1d0e\npath: live/a.yaml defaced 1234567x\n",
			" (the server said: commit: <commit>; path: live/a.yaml defaced 1234567x)"},
		{"hides a whole hash among other words", "ng 0123456789abcdef0123456789abcdef01234567: declined",
			" (the server said: ng <commit>: declined)"},
		{"hides a Gerrit Change-Id, computed from the commit", "  Change-Id: I0123456789abcdef0123456789abcdef01234567\n",
			" (the server said: Change-Id: <change-id>)"},
		{"drops control characters a hook could forge log lines with", "a\x1b[31mb\tc\n", " (the server said: a[31mbc)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, serverSaid([]byte(tc.raw)))
		})
	}
}

func TestServerMessagesKeepsOnlyTheFirstBytes(t *testing.T) {
	var m serverMessages
	n, err := m.Write([]byte(strings.Repeat("x", 3<<10)))
	assert.NoError(t, err)
	assert.Equal(t, 3<<10, n)
	n, _ = m.Write([]byte(strings.Repeat("y", 3<<10)))
	assert.Equal(t, 3<<10, n, "the rest is read and dropped, so the push goes on")
	assert.Len(t, m.b, maxSaid)
}

func TestReportError(t *testing.T) {
	declined := &packp.ReportStatus{UnpackStatus: "ok", CommandStatuses: []*packp.CommandStatus{
		{ReferenceName: "refs/heads/main", Status: "commit 3f2a9c1: missing Change-Id in message footer"}}}
	err := reportError(declined)
	require.ErrorIs(t, err, ErrRejected)
	assert.Equal(t, "the remote declined the update: command error on refs/heads/main: commit <commit>: missing Change-Id in message footer", err.Error(),
		"the same message at every attempt")

	unstored := &packp.ReportStatus{UnpackStatus: "unpack-objects abnormal exit"}
	err = reportError(unstored)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrRejected, "a pack the server could not store is no rule of its")

	assert.NoError(t, reportError(&packp.ReportStatus{UnpackStatus: "ok", CommandStatuses: []*packp.CommandStatus{{ReferenceName: "refs/heads/main", Status: "ok"}}}))
}
