package repo

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Fetch downloads refs/heads/<branch> into refs/remotes/origin/<branch>
// (forced: the remote is the truth) and returns the remote tip. An empty
// remote, or one without the branch, gives plumbing.ZeroHash and no error,
// and drops the stale tracking ref; "already up to date" is not an error.
// Only the tip is fetched (depth 1): the clone is shallow, see Compact.
func (r *Repo) Fetch(ctx context.Context, branch string) (plumbing.Hash, error) {
	ref, err := branchRef(branch)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.storeFresh(); err != nil {
		return plumbing.ZeroHash, err
	}
	spec := config.RefSpec(fmt.Sprintf("+%s:%s", ref, trackingRef(branch)))
	if err := r.configureOrigin(); err != nil {
		return plumbing.ZeroHash, err
	}
	err = r.git.FetchContext(ctx, &git.FetchOptions{
		RemoteName:   remoteName,
		RefSpecs:     []config.RefSpec{spec},
		Auth:         r.auth,
		ProxyOptions: sshDeadline(ctx, r.url),
		Tags:         git.NoTags,
		// Only the tip: the writer builds on it and never reads history. It also tells the
		// remote which commits are shallow here, so after Compact the remote still sends
		// every object a new commit needs, even one an older commit had.
		Depth: 1,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return r.trackingTip(branch)
	case errors.Is(err, transport.ErrEmptyRemoteRepository), errors.Is(err, git.NoMatchingRefSpecError{}):
		return plumbing.ZeroHash, r.dropTracking(branch)
	default:
		return plumbing.ZeroHash, fmt.Errorf("fetch %s from %s: %w%s", branch, Redact(r.shown), scrub(err, r.url), remoteHint(err, false))
	}
}

// trackingTip reads refs/remotes/origin/<branch>.
func (r *Repo) trackingTip(branch string) (plumbing.Hash, error) {
	ref, err := r.git.Storer.Reference(trackingRef(branch))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s after fetch: %w", trackingRef(branch), err)
	}
	return ref.Hash(), nil
}

// dropTracking removes the tracking ref of a branch the remote no longer has.
func (r *Repo) dropTracking(branch string) error {
	err := r.git.Storer.RemoveReference(trackingRef(branch))
	if err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return fmt.Errorf("remove %s: %w", trackingRef(branch), err)
	}
	return nil
}

// setTracking records a tip the remote is known to have.
func (r *Repo) setTracking(branch string, tip plumbing.Hash) error {
	if tip.IsZero() {
		return r.dropTracking(branch)
	}
	if err := r.git.Storer.SetReference(plumbing.NewHashReference(trackingRef(branch), tip)); err != nil {
		return fmt.Errorf("update %s: %w", trackingRef(branch), err)
	}
	return nil
}

// ValidBranch says whether Git takes branch as a branch name (ErrInvalidReferenceName if
// not): the CRD's rules say so for GitTargets stored since they exist.
func ValidBranch(branch string) error {
	_, err := branchRef(branch)
	return err
}

// branchRef validates a branch name and returns refs/heads/<branch>.
func branchRef(branch string) (plumbing.ReferenceName, error) {
	ref := plumbing.NewBranchReferenceName(branch)
	if branch == "" || ref.Validate() != nil {
		return "", fmt.Errorf("branch %q: %w", branch, plumbing.ErrInvalidReferenceName)
	}
	return ref, nil
}

// LsRemote checks that url is reachable with auth by listing its refs, the
// cheapest authenticated round trip. An empty repository is reachable (nil).
// Errors wrap go-git's transport errors (ErrAuthenticationRequired,
// ErrAuthorizationFailed, ErrRepositoryNotFound) for errors.Is.
func LsRemote(ctx context.Context, url string, auth transport.AuthMethod) error {
	if opaque(url) {
		return fmt.Errorf("list refs of %s: %w", Redact(url), ErrOpaqueURL)
	}
	url, auth = splitCredentials(url, auth)
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: remoteName, URLs: []string{url}})
	_, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, ProxyOptions: sshDeadline(ctx, url)})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return fmt.Errorf("list refs of %s: %w%s", Redact(url), scrub(err, url), remoteHint(err, false))
	}
	return nil
}
