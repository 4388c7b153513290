package repo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// Push moves refs/heads/<branch> on origin from expectedRemote to newTip as a
// compare-and-swap, so a concurrent writer's commits are never overwritten.
// expectedRemote is ZeroHash when the branch must not exist yet (this also
// creates the first branch of an empty repository). When the remote branch is
// elsewhere, the error wraps ErrRemoteMoved: fetch, replay, push again. The
// check happens twice: against the ref advertisement, and on the server,
// which applies the update only if the ref still holds the old value sent
// with it. newTip must descend from expectedRemote (else ErrNotFastForward).
// Only objects that differ from expectedRemote's tree along the changed paths
// are sent. On success refs/remotes/origin/<branch> becomes newTip. ctx bounds all of
// it; see PushWithin for a bound of the push's own.
func (r *Repo) Push(ctx context.Context, branch string, newTip, expectedRemote plumbing.Hash) error {
	return r.PushWithin(ctx, 0, branch, newTip, expectedRemote)
}

// PushWithin is Push with a timeout of the attempt's own (none when 0): when an attempt
// runs into it, perhaps after the server took the update, the remote is asked for up to
// 15 s more whether it did, so a landed push is not reported (and retried) as failed. A ctx
// that ends (the caller stopping) ends the push without that look, so a stop's bound holds
// (but for an SSH handshake in progress, which only the deadline ends: sshDeadline).
func (r *Repo) PushWithin(ctx context.Context, timeout time.Duration, branch string, newTip, expectedRemote plumbing.Hash) error {
	ref, err := branchRef(branch)
	if err != nil {
		return err
	}
	if newTip.IsZero() {
		return errors.New("push: newTip is the zero hash (deleting branches is not supported)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	attempt, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		attempt, cancel = context.WithTimeout(ctx, timeout)
	}
	err = r.push(attempt, ref, newTip, expectedRemote)
	cancel()
	if err != nil {
		err = r.classifyFailure(ctx, ref, newTip, expectedRemote, err)
	}
	if err != nil {
		// A commit whose push failed is never pushed again: the writer commits afresh on the
		// tip it fetches next. Forgetting it lets compaction run (it waits for a pending
		// commit); objects of it already stored are garbage the next compaction removes, and
		// should the push have landed after all, the next fetch brings them back.
		r.fresh = nil
		return fmt.Errorf("push %s to %s: %w%s", branch, Redact(r.shown), scrub(err, r.url), remoteHint(err, true))
	}
	// Delivered; now the clone gets the objects, before its tracking ref may point at them.
	if err := r.storeFresh(); err != nil {
		// The caller counts it failed and tries again; that attempt finds the remote at
		// this commit, or moved past it, and a fetch brings the objects.
		return fmt.Errorf("push %s to %s landed, but storing its objects in the clone failed: %w", branch, Redact(r.shown), err)
	}
	r.fresh = nil
	return r.setTracking(branch, newTip)
}

// push does one compare-and-swap attempt.
func (r *Repo) push(ctx context.Context, ref plumbing.ReferenceName, newTip, expected plumbing.Hash) error {
	sess, err := r.receivePackSession(ctx)
	if err != nil {
		return fmt.Errorf("%w (%w)", err, ErrNotSent)
	}
	defer func() { _ = sess.Close() }()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return fmt.Errorf("read remote refs: %w (%w)", err, ErrNotSent)
	}
	current := ar.References[ref.String()]
	if current == newTip {
		return nil // already there, e.g. a retry after a lost response
	}
	if current != expected {
		return fmt.Errorf("%w (%w)", movedError(ref, expected, current), ErrNotSent)
	}
	hashes, err := r.objectsToPush(newTip, expected, advertisedHashes(ar))
	if err != nil {
		return fmt.Errorf("%w (%w)", err, ErrNotSent)
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	req.Commands = []*packp.Command{{Name: ref, Old: expected, New: newTip}}
	said := hearServer(req, ar.Capabilities)
	err = r.send(ctx, sess, req, hashes, !ar.Capabilities.Supports(capability.OFSDelta))
	if errors.Is(err, ErrRejected) {
		return fmt.Errorf("%w%s", err, serverSaid(said.b))
	}
	return err
}

// hearServer asks the server for the messages its hooks print (side band), without its
// progress meters (quiet), when it offers both: a declined update then says why, as
// `git push` shows it under "remote:".
func hearServer(req *packp.ReferenceUpdateRequest, offered *capability.List) *serverMessages {
	said := &serverMessages{}
	band := capability.Sideband64k
	if !offered.Supports(band) {
		band = capability.Sideband
	}
	if offered.Supports(band) && offered.Supports(capability.Quiet) {
		_ = req.Capabilities.Set(band)
		_ = req.Capabilities.Set(capability.Quiet)
		req.Progress = said
	}
	return said
}

// receivePackSession opens a push session to origin, an SSH one bounded by ctx's deadline.
func (r *Repo) receivePackSession(ctx context.Context) (transport.ReceivePackSession, error) {
	ep, err := transport.NewEndpoint(r.url)
	if err != nil {
		return nil, fmt.Errorf("parse remote url: %w", err)
	}
	ep.Proxy = sshDeadline(ctx, r.url)
	c, err := client.NewClient(ep)
	if err != nil {
		return nil, fmt.Errorf("transport for remote: %w", err)
	}
	sess, err := c.NewReceivePackSession(ep, r.auth)
	if err != nil {
		return nil, fmt.Errorf("open push session: %w", err)
	}
	return sess, nil
}

// send streams the packfile of hashes with the update request and checks the
// server's per-ref report.
func (r *Repo) send(ctx context.Context, sess transport.ReceivePackSession, req *packp.ReferenceUpdateRequest, hashes []plumbing.Hash, refDeltas bool) error {
	// Nothing is sent before the packfile streams: an error here never landed.
	window, err := r.packWindow()
	if err != nil {
		return fmt.Errorf("%w (%w)", err, ErrNotSent)
	}
	source, err := r.packSource(hashes)
	if err != nil {
		return fmt.Errorf("%w (%w)", err, ErrNotSent)
	}
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1)
	var out io.Writer = wr
	var kept *bytes.Buffer
	if r.keepsPack(source, hashes, refDeltas) {
		kept = &bytes.Buffer{}
		out = io.MultiWriter(wr, kept)
	}
	go func() {
		bw := bufio.NewWriterSize(out, 64<<10) // the encoder writes header and body of each object apart
		_, err := packfile.NewEncoder(bw, source, refDeltas).Encode(hashes, window)
		if err == nil {
			err = bw.Flush()
		}
		_ = wr.CloseWithError(err)
		done <- err
	}()
	status, err := sess.ReceivePack(ctx, req)
	if err != nil {
		_ = rd.CloseWithError(err) // unblock the encoder
		<-done
		if status != nil && status.Error() != nil { // go-git returns the report with its error
			return reportError(status)
		}
		return fmt.Errorf("send pack: %w", err)
	}
	if err := <-done; err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	if status == nil && req.Capabilities.Supports(capability.ReportStatus) {
		// go-git answers an empty response with no report and no error: the update may or
		// may not have landed, which classifyFailure then asks the remote.
		return errors.New("the remote did not report whether it took the update")
	}
	if status != nil {
		if err := reportError(status); err != nil {
			return err
		}
	}
	if kept != nil {
		r.fresh.pack = kept.Bytes()
	}
	return nil
}

// keepsPack says whether send keeps a copy of the pack it sends, for storeFresh to store in
// the clone as it is instead of compressing the same objects again (about half the time of
// storing 10,000 of them): it does when the pack holds exactly the last commit's objects, read from
// memory, more than would be stored loose, with deltas by offset only (a server without
// them gets deltas by hash, not kept). The pack is at most the size of those objects,
// compressed, and is held until they are stored, right after the push.
func (r *Repo) keepsPack(source storer.EncodedObjectStorer, hashes []plumbing.Hash, refDeltas bool) bool {
	return !refDeltas && r.fresh != nil && !r.fresh.stored &&
		source == storer.EncodedObjectStorer(r.fresh.mem) && r.fresh.isExactly(hashes)
}

// objects reads the last commit's objects from memory and everything else from the clone.
// Callers hold r.mu.
func (r *Repo) objects() storer.EncodedObjectStorer {
	if r.fresh != nil {
		return r.fresh
	}
	return r.git.Storer
}

// packSource is where the pack's objects are read from: the last commit's objects still in
// memory when they are all the push needs (the usual commit-then-push), else the clone.
func (r *Repo) packSource(hashes []plumbing.Hash) (storer.EncodedObjectStorer, error) {
	if r.fresh != nil && r.fresh.holdsAll(hashes) {
		return r.fresh.mem, nil
	}
	return r.git.Storer, r.storeFresh() // a push of older commits too: all from the clone
}

// packWindow is the delta window from the clone's config (git's default 10).
func (r *Repo) packWindow() (uint, error) {
	cfg, err := r.git.Storer.Config()
	if err != nil {
		return 0, fmt.Errorf("read config: %w", err)
	}
	return cfg.Pack.Window, nil
}

// reportError is the error of the server's report: ErrRejected when it stored the pack and
// declined the update, with commit hashes hidden (hideHashes) since each attempt is a new
// commit; a pack it could not store (a full disk, a quota) is no rule of the server's.
func reportError(status *packp.ReportStatus) error {
	err := status.Error()
	switch {
	case err == nil:
		return nil
	case status.UnpackStatus != "ok":
		return fmt.Errorf("the remote could not store the pushed objects: %w", err)
	default:
		return fmt.Errorf("%w: %s", ErrRejected, hideHashes(err.Error()))
	}
}

// classifyFailure looks at the remote again after a failed attempt: if the
// branch is at newTip the update landed (only the answer was lost); if it is
// neither there nor at expected, another writer won the race.
// It asks within ctx, the caller's (not the attempt's, whose deadline may have passed), for
// up to classifyTimeout; a ctx already ended asks nothing. A declined update it cannot look
// past is ErrMaybeMoved.
func (r *Repo) classifyFailure(ctx context.Context, ref plumbing.ReferenceName, newTip, expected plumbing.Hash, cause error) error {
	if errors.Is(cause, ErrRemoteMoved) || errors.Is(cause, ErrNotFastForward) {
		return cause
	}
	if ctx.Err() != nil {
		return r.unlooked(cause, ctx.Err())
	}
	ctx, cancel := context.WithTimeout(ctx, classifyTimeout)
	defer cancel()
	current, err := r.remoteTip(ctx, ref)
	switch {
	case err != nil:
		return r.unlooked(cause, err)
	case current == newTip:
		return nil
	case current != expected:
		moved := fmt.Errorf("%w (%v)", movedError(ref, expected, current), cause) // not the cause's kind: a lost race
		if errors.Is(cause, ErrNotSent) || errors.Is(cause, ErrRejected) {
			// Not sent, or offered and declined: it cannot have landed (its message says
			// which), so nothing needs to look for it later.
			return notSent{moved}
		}
		return moved
	default:
		return cause
	}
}

// unlooked is cause, a failed push that the look that followed could not place (lookErr): a
// declined update becomes ErrMaybeMoved, which a lost race may be too, so that neither a
// decline's hint nor its handling (no fetch) is taken for what may be a race.
func (r *Repo) unlooked(cause, lookErr error) error {
	if !errors.Is(cause, ErrRejected) {
		return cause
	}
	return maybeMoved{declined: scrub(cause, r.url), look: scrub(lookErr, r.url)}
}

// maybeMoved is ErrMaybeMoved (and ErrNotSent): the server's decline, its credentials
// scrubbed, and why the look that followed failed. Declined gives back the decline alone.
type maybeMoved struct{ declined, look error }

func (e maybeMoved) Error() string {
	return fmt.Sprintf("%v (%v; looking at the branch again failed: %v)", ErrMaybeMoved, e.declined, e.look)
}

// Unwrap implements errors.Is for both sentinels; not for the decline's ErrRejected.
func (e maybeMoved) Unwrap() []error { return []error{ErrMaybeMoved, ErrNotSent} }

// notSent is an error that is also ErrNotSent, without saying so again.
type notSent struct{ error }

// Unwrap implements errors.Is for both.
func (n notSent) Unwrap() []error { return []error{n.error, ErrNotSent} }

// classifyTimeout bounds the look at the remote after a failed push.
const classifyTimeout = 15 * time.Second

// remoteTip lists the remote's refs and returns where ref points (ZeroHash
// when absent or the repository is empty).
func (r *Repo) remoteTip(ctx context.Context, ref plumbing.ReferenceName) (plumbing.Hash, error) {
	remote, err := r.git.Remote(remoteName)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: r.auth, ProxyOptions: sshDeadline(ctx, r.url)})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, rf := range refs {
		if rf.Name() == ref {
			return rf.Hash(), nil
		}
	}
	return plumbing.ZeroHash, nil
}

// movedError describes a lost compare-and-swap.
func movedError(ref plumbing.ReferenceName, expected, current plumbing.Hash) error {
	return fmt.Errorf("%w: %s is at %s, expected %s", ErrRemoteMoved, ref, describe(current), describe(expected))
}

// describe prints a hash, or "nothing" for an absent ref.
func describe(h plumbing.Hash) string {
	if h.IsZero() {
		return "nothing (absent)"
	}
	return h.String()
}

// advertisedHashes is the set of commits the remote announced; it has them
// and everything they reach.
func advertisedHashes(ar *packp.AdvRefs) map[plumbing.Hash]bool {
	known := make(map[plumbing.Hash]bool, len(ar.References))
	for _, h := range ar.References {
		known[h] = true
	}
	return known
}

// objectsToPush returns the commits from newTip back to expected (or to
// commits the remote advertised) and, for each, the trees and blobs that
// differ from its first parent's tree. Equal hashes are never descended into,
// so the work follows the change, not the repository. It fails with
// ErrNotFastForward when newTip does not descend from a non-zero expected.
func (r *Repo) objectsToPush(newTip, expected plumbing.Hash, known map[plumbing.Hash]bool) ([]plumbing.Hash, error) {
	w := &pushWalk{s: r.objects(), objs: map[plumbing.Hash]struct{}{}}
	reached, err := w.commits(newTip, expected, known)
	if err != nil {
		return nil, err
	}
	if !expected.IsZero() && !reached {
		if err := r.requireAncestor(expected, newTip); err != nil {
			return nil, err
		}
	}
	out := make([]plumbing.Hash, 0, len(w.objs))
	for h := range w.objs {
		out = append(out, h)
	}
	return out, nil
}

// Landed returns the first of candidates that tip is, or descends from, within the history
// the clone holds: it is shallow, so the walk goes back through the commits it has (at most
// limit), looking at their parents' hashes too. A push whose answer was lost may have
// landed and been built on since (by another target of the branch, or a person); a commit
// the walk cannot reach is not reported.
func (r *Repo) Landed(tip plumbing.Hash, candidates []plumbing.Hash, limit int) (plumbing.Hash, bool) {
	if len(candidates) == 0 {
		return plumbing.ZeroHash, false
	}
	return r.walk(tip, limit, func(h plumbing.Hash, _ *object.Commit) bool { return slices.Contains(candidates, h) })
}

// FindCommit returns the first commit from tip back (breadth first, at most limit commits
// of the history the shallow clone holds) for which match is true.
func (r *Repo) FindCommit(tip plumbing.Hash, limit int, match func(*object.Commit) bool) (plumbing.Hash, bool) {
	return r.walk(tip, limit, func(_ plumbing.Hash, c *object.Commit) bool { return c != nil && match(c) })
}

// walk visits tip and its ancestors breadth first, at most limit of them, until found is
// true for one: a hash with its commit, or with nil beyond the shallow clone's history
// (whose parents are then not known).
func (r *Repo) walk(tip plumbing.Hash, limit int, found func(plumbing.Hash, *object.Commit) bool) (plumbing.Hash, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok, _ := r.walkToEdge(tip, limit, found)
	return h, ok
}

// walkToEdge is walk that also reports whether, finding nothing, it met a commit the
// shallow clone does not hold before limit (edge): more history might have had one.
// Callers hold r.mu: a compaction or fetch must not swap the store under the walk.
func (r *Repo) walkToEdge(tip plumbing.Hash, limit int, found func(plumbing.Hash, *object.Commit) bool) (_ plumbing.Hash, _, edge bool) {
	if tip.IsZero() {
		return plumbing.ZeroHash, false, false
	}
	seen := map[plumbing.Hash]bool{}
	queue := []plumbing.Hash{tip}
	for len(queue) > 0 && len(seen) < limit {
		h := queue[0]
		queue = queue[1:]
		if seen[h] {
			continue
		}
		seen[h] = true
		c, err := object.GetCommit(r.objects(), h)
		if err != nil {
			c = nil // beyond the shallow clone's history
			edge = true
		}
		if found(h, c) {
			return h, true, false
		}
		if c != nil {
			queue = append(queue, c.ParentHashes...)
		}
	}
	return plumbing.ZeroHash, false, edge
}

// requireAncestor fails with ErrNotFastForward unless anc is an ancestor of tip.
func (r *Repo) requireAncestor(anc, tip plumbing.Hash) error {
	ancC, err := object.GetCommit(r.objects(), anc)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return fmt.Errorf("%w: %s is unknown locally", ErrNotFastForward, anc)
	}
	if err != nil {
		return fmt.Errorf("read commit %s: %w", anc, err)
	}
	tipC, err := object.GetCommit(r.objects(), tip)
	if err != nil {
		return fmt.Errorf("read commit %s: %w", tip, err)
	}
	ok, err := ancC.IsAncestor(tipC)
	if err != nil {
		return fmt.Errorf("ancestry of %s: %w", tip, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s is not an ancestor of %s", ErrNotFastForward, anc, tip)
	}
	return nil
}

// pushWalk collects the objects to send.
type pushWalk struct {
	s    storer.EncodedObjectStorer
	objs map[plumbing.Hash]struct{}
}

// commits walks back from tip, stopping at expected and at commits the remote
// has, and reports whether expected was reached.
func (w *pushWalk) commits(tip, expected plumbing.Hash, known map[plumbing.Hash]bool) (bool, error) {
	reached := false
	visited := map[plumbing.Hash]bool{}
	queue := []plumbing.Hash{tip}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		if visited[h] {
			continue
		}
		visited[h] = true
		if h == expected && !h.IsZero() {
			reached = true
			continue
		}
		if known[h] {
			continue
		}
		parents, err := w.commit(h)
		if err != nil {
			return false, err
		}
		queue = append(queue, parents...)
	}
	return reached, nil
}

// commit adds commit h and the tree objects it introduces; it returns the
// parents to visit next.
func (w *pushWalk) commit(h plumbing.Hash) ([]plumbing.Hash, error) {
	c, err := object.GetCommit(w.s, h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", h, err)
	}
	w.objs[h] = struct{}{}
	base := plumbing.ZeroHash
	if len(c.ParentHashes) > 0 {
		p, err := object.GetCommit(w.s, c.ParentHashes[0])
		if err != nil {
			return nil, fmt.Errorf("read parent of %s: %w", h, err)
		}
		base = p.TreeHash
	}
	if err := w.tree(c.TreeHash, base); err != nil {
		return nil, err
	}
	return c.ParentHashes, nil
}

// tree adds tree h and every entry that differs from the same path in tree
// old (ZeroHash: none), recursing only into subtrees whose hashes differ.
// Gitlinks are skipped: their commits live in another repository.
func (w *pushWalk) tree(h, old plumbing.Hash) error {
	if h == old {
		return nil
	}
	if _, seen := w.objs[h]; seen {
		return nil
	}
	w.objs[h] = struct{}{}
	t, err := object.GetTree(w.s, h)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", h, err)
	}
	before, err := w.entriesOf(old)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		if err := w.entry(e, before[e.Name]); err != nil {
			return err
		}
	}
	return nil
}

// entry adds one tree entry unless the old tree had the same object there.
func (w *pushWalk) entry(e, old object.TreeEntry) error {
	switch {
	case e.Mode == filemode.Submodule:
		return nil
	case e.Mode == filemode.Dir:
		base := plumbing.ZeroHash
		if old.Mode == filemode.Dir {
			base = old.Hash
		}
		return w.tree(e.Hash, base)
	case e.Hash != old.Hash:
		w.objs[e.Hash] = struct{}{}
	}
	return nil
}

// entriesOf indexes the entries of tree h by name (none for ZeroHash).
func (w *pushWalk) entriesOf(h plumbing.Hash) (map[string]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	t, err := object.GetTree(w.s, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	m := make(map[string]object.TreeEntry, len(t.Entries))
	for _, e := range t.Entries {
		m[e.Name] = e
	}
	return m, nil
}
