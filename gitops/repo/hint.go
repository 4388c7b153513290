package repo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh/knownhosts"
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

// Declined is err, a push that was ErrMaybeMoved, once a fetch showed that the branch had
// not moved: the server's decline (ErrRejected) with a decline's hint, without the failed
// look, which would change the status at every attempt.
func Declined(err error) error {
	var mm maybeMoved
	if errors.As(err, &mm) {
		return fmt.Errorf("%w%s", mm.declined, remoteHint(ErrRejected, true))
	}
	return fmt.Errorf("%w%s: %v", ErrRejected, remoteHint(ErrRejected, true), err)
}

// Refused reports whether err, from a fetch or a push, is the remote's answer that the
// credentials may not do it: HTTP's 401, 403 or 404, an SSH key it did not accept, or a host
// key that is not the one known. Only that positive evidence counts: an outage, a rate
// limit, a connection cut part-way or a local error tell nothing of the credentials.
func Refused(err error) bool {
	return CredentialsRejected(err) || errors.Is(err, transport.ErrAuthorizationFailed) || errors.Is(err, transport.ErrRepositoryNotFound)
}

// CredentialsRejected reports whether err is the remote's answer that it does not accept
// who is asking: HTTP's 401, an SSH key it did not accept, a host key that is not the one
// known_hosts holds. Unlike a 403 or 404, which some servers also answer while rate
// limiting or with a repository not created yet, only a new Secret (or a key granted on the
// server) changes that answer.
func CredentialsRejected(err error) bool {
	if err == nil {
		return false
	}
	var hostKey *knownhosts.KeyError
	return errors.Is(err, transport.ErrAuthenticationRequired) || errors.As(err, &hostKey) ||
		strings.Contains(err.Error(), "ssh: unable to authenticate")
}
