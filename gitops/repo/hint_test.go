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
	"golang.org/x/crypto/ssh/knownhosts"
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

func TestRefused(t *testing.T) {
	status := func(code int) error {
		return fmt.Errorf("fetch main from x: %w", plumbing.NewUnexpectedError(&githttp.Err{Response: &http.Response{StatusCode: code,
			Request: &http.Request{URL: &url.URL{Scheme: "https", Host: "git.example"}}}}))
	}
	for _, tc := range []struct {
		name              string
		err               error
		refused, rejected bool
	}{
		{"is credentials refused over HTTP", fmt.Errorf("fetch: %w", transport.ErrAuthenticationRequired), true, true},
		{"is credentials that may not read", fmt.Errorf("fetch: %w", transport.ErrAuthorizationFailed), true, false},
		{"is a repository the credentials cannot see", fmt.Errorf("fetch: %w", transport.ErrRepositoryNotFound), true, false},
		{"is a key refused over SSH", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"), true, true},
		{"is a host key that is not the one known", fmt.Errorf("ssh: handshake failed: %w", &knownhosts.KeyError{}), true, true},
		{"is not a connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false, false},
		{"is not a timeout", fmt.Errorf("fetch: %w", context.DeadlineExceeded), false, false},
		{"is not a server error", status(http.StatusServiceUnavailable), false, false},
		{"is not a rate limit", status(http.StatusTooManyRequests), false, false},
		{"is not a connection an SSH server cut", errors.New("ssh: handshake failed: EOF"), false, false},
		{"is not nothing", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.refused, Refused(tc.err), "Refused")
			assert.Equal(t, tc.rejected, CredentialsRejected(tc.err), "CredentialsRejected")
		})
	}
}
