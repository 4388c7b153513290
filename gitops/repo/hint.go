package repo

import (
	"errors"

	"github.com/go-git/go-git/v5/plumbing/transport"
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
