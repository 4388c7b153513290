package repo

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// remoteHint says what to fix for a remote's refusal that is about configuration, not an
// outage: credentials refused, credentials that may read but not push, a repository the
// credentials cannot see, an update the server declined (a protected branch, a rule). "" otherwise.
func remoteHint(err error, pushing bool) string {
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return " (the server refused the credentials: check the GitProvider's Secret)"
	case errors.Is(err, transport.ErrAuthorizationFailed) && pushing:
		return " (the credentials may not push: give the GitProvider's credentials write access to the branch)"
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return " (the credentials may not read the repository: check the GitProvider's Secret)"
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return " (check the GitProvider's spec.url, and that its credentials can see the repository)"
	case errors.Is(err, ErrRejected):
		return " (allow the GitProvider's credentials to push to a protected branch, or change what the server's rules refuse)"
	default:
		return ""
	}
}

// Unreachable reports whether err, from a fetch or a push, says the remote could not be
// reached or failed itself (a network error, a timeout, an HTTP 5xx) rather than that it
// answered: such an error tells nothing of the credentials or the branch. A refusal of the
// credentials over SSH (a key revoked, a host key changed) is an answer, not this.
func Unreachable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var unexpected *plumbing.UnexpectedError
	if !errors.As(err, &unexpected) { // it does not unwrap: its Err is read here
		return false
	}
	var status *githttp.Err
	return errors.As(unexpected.Err, &status) && status.Response != nil && status.Response.StatusCode >= http.StatusInternalServerError
}
