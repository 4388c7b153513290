package repo

import "errors"

// Sentinel errors for outcomes callers are expected to handle. They are
// returned wrapped; test with errors.Is.
var (
	// ErrNoChange means the commit would have the same tree as its parent, so
	// none was made: the folder already holds the desired content.
	ErrNoChange = errors.New("no change: the tree equals the parent's tree")

	// ErrRemoteMoved means the remote branch is no longer at the expected
	// commit (someone else pushed). Fetch, replay the writes on the new tip,
	// and push again.
	ErrRemoteMoved = errors.New("remote branch moved")

	// ErrNotSent comes with a push's error when nothing was sent: the remote had moved,
	// or the push failed before it offered the update (the remote unreachable, its refs
	// unreadable, its pack not prepared locally); and with ErrMaybeMoved, whose update was offered and declined. The commit
	// cannot have landed, so nothing needs to look for it later.
	ErrNotSent = errors.New("nothing was sent")

	// ErrRejected means the server took the pack and declined the update: a protected
	// branch, or a rule about this commit's content or author (a pre-receive hook, push
	// protection). Another commit may be taken where this one is not.
	ErrRejected = errors.New("the remote declined the update")

	// ErrMaybeMoved means the server declined the update and the look that followed could not
	// tell why: over HTTP a race lost to another writer, between the ref advertisement and
	// the update, is declined like a protected branch. It comes with ErrNotSent (a declined
	// update never landed), not with ErrRejected: fetch, and try again on the tip found; a
	// push declined again is then told apart.
	ErrMaybeMoved = errors.New("the remote declined the update and may have moved")

	// ErrNotFastForward means the commit to push does not descend from the
	// expected remote commit; pushing it would discard commits, so it is
	// refused.
	ErrNotFastForward = errors.New("commit does not descend from the expected remote commit")

	// ErrInvalidPath means a path is not a clean, relative, slash-separated
	// path inside the repository (empty segments, ".", "..", ".git",
	// backslashes or control characters).
	ErrInvalidPath = errors.New("invalid repository path")

	// ErrPathConflict means a path needs a directory where the tree has a
	// file, or a file where the tree has a directory.
	ErrPathConflict = errors.New("path conflicts with an existing entry")

	// ErrInvalidSignature means an author or committer cannot be encoded as
	// a valid Git identity (empty name, '<', '>' or newline, zero time).
	ErrInvalidSignature = errors.New("invalid commit signature")

	// ErrDamaged means the local clone failed verification; Open repairs it,
	// and RepairedDamage reports what was found.
	ErrDamaged = errors.New("local clone is damaged")

	// ErrNotRepository means the clone directory holds something that does not
	// look like a bare Git repository, so it is not deleted to repair it.
	ErrNotRepository = errors.New("directory is not a bare git repository")

	// ErrNoKnownHosts means SSH credentials lack known_hosts; host keys are
	// always verified, so the connection is refused rather than trusted blindly.
	ErrNoKnownHosts = errors.New("ssh credentials need a non-empty known_hosts")

	// ErrCommitPending means a commit waits for its push, so the clone is not compacted:
	// compaction would delete that commit's objects.
	ErrCommitPending = errors.New("a commit waits for its push")

	// ErrInvalidSecret means the credentials Secret is incomplete or
	// inconsistent for the repository URL.
	ErrInvalidSecret = errors.New("invalid git credentials secret")

	// ErrOpaqueURL is returned for a repository URL with "://" whose credentials cannot be told
	// apart from the rest (see opaque); it is never dialled, nor written to a clone's config.
	ErrOpaqueURL = errors.New("the repository URL cannot be taken apart: escape the special characters of its user info " +
		"(%2F for /, %3F for ?, %23 for #, %40 for @), or better, move the credentials into the GitProvider's Secret")
)
