package repo

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/stretchr/testify/assert"
)

func TestRemoteHint(t *testing.T) {
	declined := fmt.Errorf("%w: command error on refs/heads/main: protected branch hook declined", ErrRejected)
	cases := []struct {
		name    string
		err     error
		pushing bool
		says    string
	}{
		{"points at the Secret when the server refuses the credentials", fmt.Errorf("x: %w", transport.ErrAuthenticationRequired), false, "refused the credentials"},
		{"asks for write access when credentials may read but not push", transport.ErrAuthorizationFailed, true, "write access"},
		{"asks for read access when credentials may not fetch", transport.ErrAuthorizationFailed, false, "may not read"},
		{"points at the URL for a repository not found", transport.ErrRepositoryNotFound, false, "spec.url"},
		{"names a protected branch when the server declines a push", declined, true, "protected branch"},
		{"names the server's rules when it declines a push", declined, true, "change what the server's rules refuse"},
		{"says nothing of an outage", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := remoteHint(tc.err, tc.pushing)
			if tc.says == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.says)
		})
	}
}
