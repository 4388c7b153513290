package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// deepenRef is where Deepen fetches to: not the branch's tracking ref, whose tip the writer
// builds on and compares its pushes with.
const deepenRef = plumbing.ReferenceName("refs/gitops-reverser/deepen")

// DeepenToLanded fetches up to limit commits of branch's history when a walk from tip
// (Landed) finds none of candidates within the history the clone holds and stops at its
// shallow edge: every fetch takes only the tip, so a commit whose push reported an error,
// and on which others pushed two commits or more since, is out of sight, and the message
// it carried would be taken for unused, or committed a second time. See deepen.
func (r *Repo) DeepenToLanded(ctx context.Context, branch string, tip plumbing.Hash, candidates []plumbing.Hash, limit int) error {
	if len(candidates) == 0 {
		return nil
	}
	return r.deepen(ctx, branch, tip, limit, func(h plumbing.Hash, _ *object.Commit) bool { return slices.Contains(candidates, h) })
}

// DeepenToFind is DeepenToLanded for a commit match accepts: an earlier leader's commit
// that others have pushed on since is out of sight too, so a search fetches history until
// it meets, say, a commit older than any it looks for.
func (r *Repo) DeepenToFind(ctx context.Context, branch string, tip plumbing.Hash, limit int, match func(*object.Commit) bool) error {
	return r.deepen(ctx, branch, tip, limit, func(_ plumbing.Hash, c *object.Commit) bool { return c != nil && match(c) })
}

// deepen fetches up to limit commits of branch unless a walk from tip finds one, or ends
// at the root or at limit rather than at the shallow clone's edge. The branch's tracking
// ref is left as it is (deepenRef).
func (r *Repo) deepen(ctx context.Context, branch string, tip plumbing.Hash, limit int, found func(plumbing.Hash, *object.Commit) bool) error {
	if tip.IsZero() {
		return nil
	}
	ref, err := branchRef(branch)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok, edge := r.walkToEdge(tip, limit, found); ok || !edge {
		return nil
	}
	if err := r.storeFresh(); err != nil {
		return err
	}
	// Left behind (a failure here, a kill), it is removed when the clone is opened or
	// compacted, never trusted: compaction deletes what only it names.
	defer func() { _ = r.git.Storer.RemoveReference(deepenRef) }()
	if err := r.configureOrigin(); err != nil {
		return err
	}
	err = r.git.FetchContext(ctx, &git.FetchOptions{
		RemoteName:   remoteName,
		RefSpecs:     []config.RefSpec{config.RefSpec(fmt.Sprintf("+%s:%s", ref, deepenRef))},
		Auth:         r.auth,
		ProxyOptions: sshDeadline(ctx, r.url),
		Tags:         git.NoTags,
		Depth:        limit,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("fetch %d commits of %s from %s: %w%s", limit, branch, Redact(r.shown), scrub(err, r.url), remoteHint(err, false))
	}
	return nil
}
