package repo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
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

func TestUnreachable(t *testing.T) {
	status := func(code int) error {
		return fmt.Errorf("fetch main from x: %w", plumbing.NewUnexpectedError(&githttp.Err{Response: &http.Response{StatusCode: code,
			Request: &http.Request{URL: &url.URL{Scheme: "https", Host: "git.example"}}}}))
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"is a connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"is a timeout", fmt.Errorf("fetch: %w", context.DeadlineExceeded), true},
		{"is a server error", status(http.StatusServiceUnavailable), true},
		{"is not a client error the server answered", status(http.StatusBadRequest), false},
		{"is not credentials refused over HTTP", fmt.Errorf("fetch: %w", transport.ErrAuthenticationRequired), false},
		{"is not a key refused over SSH", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"), false},
		{"is not a repository that is not there", fmt.Errorf("fetch: %w", transport.ErrRepositoryNotFound), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Unreachable(tc.err))
		})
	}
}
