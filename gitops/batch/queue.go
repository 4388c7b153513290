package batch

import (
	"slices"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"k8s.io/apimachinery/pkg/types"
)

// authorWindow is the open commit window of one author on one target: the objects they
// changed (by key; the cluster holds the state) and, when a CommitRequest attached to it,
// the message to commit with.
type authorWindow struct {
	author string
	dirty  map[ObjectKey]intent
	Window
	// journalMark is the journal's mark when the window was detached to be committed: its
	// deletions are those recorded up to it (deleteJournal.writtenUpTo).
	journalMark uint64
	// compared says the window holds objects a list found (relist): it compares the cluster
	// with Git, so finding nothing to change must be judged at the remote's current tip,
	// not the one last fetched (a person's commit since may have removed a file).
	compared bool
	// forgot says changes of gone objects of the window that would change nothing in Git
	// were forgotten (dropGone): a request left without objects was not overtaken by another
	// author.
	forgot bool
	// requests are the CommitRequests this window commits for, oldest first.
	requests []*CommitRequest
	// messageMade is set once the commit being made of the window took its message from
	// requests, until the window is taken to be committed again: a request handed over
	// later waits for its author's next change (queue.closing).
	messageMade bool
	// joined are the requests that joined the window while it was being committed
	// (closing), under qmu: the worker reads requests without it then. The worker takes them
	// into requests (takeJoined) when the commit makes its message (commitPlan), when the
	// window changed nothing (changedNothing: answered with its own) and when it waits for
	// its cache (deferAll); a window put back carries them (restore), and delivered leaves
	// any still here waiting for their author's next change. joinedLate says some did:
	// held back after that attempt (holdBack), the window is tried at once, as for a
	// request parked meanwhile, to learn what it waits for.
	joined     []*CommitRequest
	joinedLate bool
	// now closes the window at once: a drain, or a request's retry.
	now bool
	// askedAt is when its author last asked to commit (CommitRequest; zero: not asked): the
	// window closes once neither her changes nor a request came for askedQuiet, and at
	// askedWait after the request at the latest (or on its own quiet, if shorter, counted
	// from her last change as always). A change made just before the request may still be
	// on its way from another resource's watch.
	askedAt time.Time
	// notBefore holds back a window whose objects all wait for their cache (ErrNotSynced),
	// without holding back the target's other windows; deferrals counts those attempts, for
	// the backoff.
	notBefore time.Time
	deferrals int
	// declined is set on a window held back because the server declined its commit
	// (worker.declined): only a change to what it holds may be the fix.
	declined bool
	// shortened says its hold was cut to a second for such a change (a quick try); steady
	// says the hold follows a declined quick try, and no change shortens it: at most one
	// quick try per step of the backoff, so an object changed every second does not make a
	// push of each change.
	shortened, steady bool
	// builtAt is when the first commit of the window was built (zero: none yet): its
	// change-to-commit latency is recorded once, not again at each retry of a failed push,
	// and its commit-to-push latency counts from then, through every retry.
	builtAt time.Time
	// tried are the window's last commits (up to keptAttempts) whose push reported an
	// error: one a retry finds on the remote was delivered after all (foundDelivered).
	tried []plumbing.Hash
	// failed is set on a window whose commit failed and is put back for a retry: while one
	// is, the target's write failure stands, whatever other windows commit meanwhile.
	failed bool
	// listed is set on a window relist opened for its author while their window was being
	// committed, until they change something: a CommitRequest waiting for their next change
	// does not take it for one.
	listed bool
	// since is, once the window is detached (due), when each of its objects' oldest
	// uncommitted change came (queue.since): one left to another author's window keeps it.
	since map[ObjectKey]time.Time
	// coAuthors are, once the window is detached, the queue's coAuthors of its objects.
	coAuthors map[ObjectKey][]string
}

// intent is how a waiting object may be written, merged over the changes that made it
// dirty (see Change.merge).
type intent struct {
	// deleted: a delete was seen; the document is removed when the object is gone at
	// commit time.
	deleted bool
	// createOnly: the document is written only when Git has none.
	createOnly bool
	// pruned: a list under prune mode Always found the object gone (Change.Pruned).
	pruned bool
}

// removes says whether the document of an object gone or out of every rule's selection at
// commit time is removed: a delete was seen, or a list under prune mode Always, still the
// target's mode, found it gone.
func (i intent) removes(mode string) bool {
	return i.deleted || (i.pruned && mode == PruneAlways)
}

// intentOf is the intent a change carries.
func intentOf(c Change) intent {
	return intent{deleted: c.Deleted, createOnly: c.CreateOnly, pruned: c.Pruned}
}

// merge is what newer leaves waiting over i (Change.merge).
func (i intent) merge(newer intent) intent {
	return intent{deleted: i.deleted || newer.deleted, createOnly: i.createOnly && newer.createOnly, pruned: i.pruned || newer.pruned}
}

// queue is one target's pending work: a window per author, which window holds each dirty
// object, and CommitRequests waiting for their author's next change. Its methods do no
// locking; the worker holds qmu around them.
type queue struct {
	windows map[string]*authorWindow
	owner   map[ObjectKey]string
	// since is when each dirty object's oldest change not yet committed came, whichever
	// windows it moved through since: a window's age for maxDelay is its oldest object's,
	// so an object two authors keep changing in turn still commits.
	since map[ObjectKey]time.Time
	// coAuthors are, for each dirty object, the people whose change of it left their window
	// for a later writer's, uncommitted: the commit carries their change too, and credits
	// them (Co-authored-by). An operator adding its finalizer within the quiet period after a
	// person's create authors the commit; the person is its co-author.
	coAuthors map[ObjectKey][]string
	waiting   map[string][]*CommitRequest
	// flushing are the windows due detached and the worker is committing now: their objects
	// are still the queue's, for holds.
	flushing []*authorWindow
	// touched is, for each dirty object a window holds, the tick of its last change there:
	// the worker drops a change it judged needless (goneCandidates, dropGone) only when no
	// change of the object came while it judged, such as its creation again. Every change
	// that places an object ticks; merges into a waiting intent (mergeWaiting, mergeOlder)
	// only add a removal (intent.merge), which dropGone checks again (intent.removes), so
	// they need not.
	touched map[ObjectKey]uint64
	tick    uint64
}

func newQueue() *queue {
	return &queue{windows: map[string]*authorWindow{}, owner: map[ObjectKey]string{}, since: map[ObjectKey]time.Time{},
		coAuthors: map[ObjectKey][]string{}, waiting: map[string][]*CommitRequest{}, touched: map[ObjectKey]uint64{}}
}

// add records that author changed key at now. An object lives in the window of whoever
// changed it last: its state is read from the cluster at commit time, so that is whose
// change the commit carries. Requests waiting for this author attach to the window.
func (q *queue) add(key ObjectKey, in intent, author string, now time.Time) {
	failed := false
	if prev, ok := q.owner[key]; ok {
		// A delete already seen stays a delete: a snapshot's copy of the object, listed
		// before the delete, must not turn it into a kept document.
		if win := q.windows[prev]; win != nil {
			if was, held := win.dirty[key]; held {
				in = was.merge(in)
				if prev != author && prev != "" && !win.listed { // a list's change is nobody's
					q.coAuthor(key, prev)
				}
			}
			failed = win.failed // a key whose commit failed keeps the failure with it
		}
		if prev != author {
			q.take(prev, key)
		}
	}
	win := q.window(author)
	win.listed = false
	win.failed = win.failed || failed
	if rs := q.waiting[author]; len(rs) > 0 {
		win.requests = append(win.requests, rs...)
		delete(q.waiting, author)
		if win.declined {
			win.notBefore = time.Time{} // a request that rides it ends its hold; it commits when due
		}
	}
	_, held := win.dirty[key]
	switch {
	case win.declined && held && !win.steady && now.Add(time.Second).Before(win.notBefore):
		// Perhaps the fix of what the server declined: tried within a second, the backoff
		// going on should it be declined again.
		win.notBefore, win.shortened = now.Add(time.Second), true
	case !win.declined && !held:
		win.notBefore, win.deferrals = time.Time{}, 0 // something new to commit: no more holding back
	}
	q.place(win, key, in, now)
}

// place puts key in win, its author's window, at now. The window is as old as its oldest
// object: one that moved in from another author's window brings its age along.
func (q *queue) place(win *authorWindow, key ObjectKey, in intent, now time.Time) {
	win.dirty[key] = in
	win.Count = len(win.dirty)
	q.owner[key] = win.author
	q.touch(key)
	q.dirtySince(key, now)
	if since := q.since[key]; win.First.IsZero() || since.Before(win.First) {
		win.First = since
	}
	win.Last = now
}

// sinceOf is when key's oldest uncommitted change came, as the window knew it when it was
// detached; its opening when it did not hold key then.
func (win *authorWindow) sinceOf(key ObjectKey) time.Time {
	if at, ok := win.since[key]; ok && !at.IsZero() {
		return at
	}
	return win.First
}

// oldestOf is when the oldest change of keys, less those in left, came: the age of a
// commit that carries them, which an object left out of it (waiting for its cache) must
// not make older. The window's own age when none of keys is known.
func (win *authorWindow) oldestOf(keys, left map[ObjectKey]intent) time.Time {
	if first := earliest(keys, left, win.sinceOf); !first.IsZero() {
		return first
	}
	return win.First
}

// earliest is the earliest non-zero at(k) of keys less those in left; zero when none.
func earliest(keys, left map[ObjectKey]intent, at func(ObjectKey) time.Time) time.Time {
	var first time.Time
	for k := range keys {
		if _, out := left[k]; out {
			continue
		}
		if t := at(k); !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// keepAge makes key, waiting in some window now, as old as it was in from, a detached
// window that commits without it.
func (q *queue) keepAge(key ObjectKey, from *authorWindow) {
	win := q.windows[q.owner[key]]
	since := from.sinceOf(key)
	if win == nil || since.IsZero() {
		return
	}
	q.dirtySince(key, since)
	if since.Before(win.First) {
		win.First = since
	}
}

// dirtySince records that key has waited since at, unless it waited from earlier.
func (q *queue) dirtySince(key ObjectKey, at time.Time) {
	if since, ok := q.since[key]; !ok || at.Before(since) {
		q.since[key] = at
	}
}

// tookFrom credits, on key, which waits in another author's window now, the change win (a
// detached window that commits without it) held of it: win's own co-authors, and win's
// author unless win held only a list's changes.
func (q *queue) tookFrom(key ObjectKey, win *authorWindow) {
	owner, owned := q.owner[key]
	if !owned {
		return
	}
	q.coAuthor(key, win.coAuthors[key]...)
	if owner != win.author && !win.listed {
		q.coAuthor(key, win.author)
	}
}

// creditOlder credits, on the object waiting in the queue, an older change of it handed
// over (a parked one, mergeOlder): its co-authors, and its author unless it is a list's or
// bookkeeping, or the author of the window the object waits in.
func (q *queue) creditOlder(c Change) {
	owner, owned := q.owner[c.Key]
	if !owned {
		return
	}
	q.coAuthor(c.Key, c.CoAuthors...)
	if !c.Relisted && !c.Bookkeeping && c.Author != owner {
		q.coAuthor(c.Key, c.Author)
	}
}

// coAuthor records that names' change of key waits in another author's window.
func (q *queue) coAuthor(key ObjectKey, names ...string) {
	for _, n := range names {
		if kept := credited(q.coAuthors[key], n); len(kept) > 0 {
			q.coAuthors[key] = kept
		}
	}
}

// relist records a change a list brought (Change.Relisted): an object already waiting in
// an author's window stays there, its intent merged as add would (the list's rules are the
// current ones), without moving the window's times; any other goes to the committer's
// window.
func (q *queue) relist(key ObjectKey, in intent, now time.Time) {
	prev, owned := q.owner[key]
	if owned && prev != "" && q.mergeWaiting(key, in, prev) {
		q.windows[prev].compared = true
		return
	}
	if author := q.committing(key); author != "" && !owned {
		// Its author's window is being committed: the list waits in a window of theirs, so
		// that a failed push puts the change back with them (restore), not with the committer.
		win := q.window(author) // no waiting request joins it: a list is not their change
		if len(win.dirty) == 0 && len(win.requests) == 0 {
			win.listed = true
		}
		q.place(win, key, in, now)
		win.compared = true
		return
	}
	q.add(key, in, "", now)
	q.windows[""].compared = true
}

// note records a change of author's that changed nothing the writer commits
// (Change.Bookkeeping): an object waiting in a window, the committer's included, stays there,
// its intent merged; one being committed with another author's window waits in a window of
// theirs, as relist keeps it; any other is added as author's change. Unlike a list's, it does
// not make its window ask the remote whether Git moved when it finds nothing to write.
func (q *queue) note(key ObjectKey, in intent, author string, now time.Time) {
	prev, owned := q.owner[key]
	if owned && prev != author && q.mergeWaiting(key, in, prev) {
		return
	}
	if other := q.committing(key); other != "" && other != author && !owned {
		win := q.window(other) // no waiting request joins it: the write is not their change
		if len(win.dirty) == 0 && len(win.requests) == 0 {
			win.listed = true
		}
		q.place(win, key, in, now)
		return
	}
	q.add(key, in, author, now)
}

// mergeWaiting merges in into key's intent in author's window, if it waits there, and
// reports whether it did.
func (q *queue) mergeWaiting(key ObjectKey, in intent, author string) bool {
	if win := q.windows[author]; win != nil {
		if was, held := win.dirty[key]; held {
			win.dirty[key] = was.merge(in)
			return true
		}
	}
	return false
}

// listedBy records a change a list brought of an object it attributes to author, its
// creator (Change.Relisted with an Author): added as theirs, in a window that compared the
// cluster with Git like any other list's. An object waiting in, or being committed with,
// another author's window stays there as with relist: that author changed it since the
// cache the list read held the creator's content.
func (q *queue) listedBy(key ObjectKey, in intent, author string, now time.Time) {
	prev, owned := q.owner[key]
	if other := q.committing(key); (owned && prev != "" && prev != author) || (!owned && other != "" && other != author) {
		q.relist(key, in, now)
		return
	}
	q.add(key, in, author, now)
	q.windows[author].compared = true
}

// committing is the author of the window being committed that holds key, or "".
func (q *queue) committing(key ObjectKey) string {
	for _, win := range q.flushing {
		if _, ok := win.dirty[key]; ok {
			return win.author
		}
	}
	return ""
}

// touch records a change of key, held by a window (touched).
func (q *queue) touch(key ObjectKey) {
	q.tick++
	q.touched[key] = q.tick
}

// goneCandidates lists the objects waiting in windows not in doubt (inDoubt, whose retry
// settles them first) with the tick of their last change (touched) and whether their plan
// would remove a document once the object is gone (intent.removes under mode):
// worker.collapseDeletes forgets those that would change nothing in Git.
func (q *queue) goneCandidates(mode string) map[ObjectKey]goneCandidate {
	out := map[ObjectKey]goneCandidate{}
	for _, win := range q.windows {
		if inDoubt(win) {
			continue
		}
		for k, in := range win.dirty {
			if q.owner[k] == win.author {
				out[k] = goneCandidate{tick: q.touched[k], removes: in.removes(mode), deleted: in.deleted}
			}
		}
	}
	return out
}

// goneCandidate is an object goneCandidates lists: the tick of its last change, whether
// its plan would remove its document were it gone, and whether it waits as a delete (whose
// line the journal keeps).
type goneCandidate struct {
	tick             uint64
	removes, deleted bool
}

// journaledOf is the keys of dropped that waited as deletes: only their lines leave the
// journal, not a line of the same object another change owns (a deletion an earlier
// process left, waiting for the target's first list).
func journaledOf(dropped []ObjectKey, gone map[ObjectKey]goneCandidate) []ObjectKey {
	var keys []ObjectKey
	for _, k := range dropped {
		if gone[k].deleted {
			keys = append(keys, k)
		}
	}
	return keys
}

// dropGone forgets the objects of gone (from goneCandidates, judged by
// worker.collapseDeletes to change nothing in Git), each unless a change of it came since
// its tick there or it waits with another intent (under mode); it returns those it forgot.
func (q *queue) dropGone(gone map[ObjectKey]goneCandidate, mode string) []ObjectKey {
	var dropped []ObjectKey
	for k, c := range gone {
		author, ok := q.owner[k]
		win := q.windows[author]
		if !ok || win == nil || q.touched[k] != c.tick {
			continue
		}
		if in, waits := win.dirty[k]; !waits || in.removes(mode) != c.removes {
			continue
		}
		q.take(author, k)
		if left := q.windows[author]; left != nil {
			left.forgot = true // its requests' answer: nothing of theirs changed the folder
		}
		delete(q.owner, k)
		delete(q.since, k)
		delete(q.coAuthors, k)
		delete(q.touched, k)
		dropped = append(dropped, k)
	}
	return dropped
}

// take removes key from author's window, dropping the window when nothing is left in it
// and no request waits on it.
func (q *queue) take(author string, key ObjectKey) {
	win := q.windows[author]
	if win == nil {
		return
	}
	delete(win.dirty, key)
	win.Count = len(win.dirty)
	if len(win.dirty) == 0 && len(win.requests) == 0 {
		delete(q.windows, author)
		return
	}
	if since := q.since[key]; !since.After(win.First) {
		q.ageFromObjects(win) // it may have been the oldest
	}
}

// ageFromObjects makes win as old as its oldest object (for maxDelay, the pending gauge and
// the latency metrics), not one that left it for another author's window. A window without
// objects (requests only) keeps its age.
func (q *queue) ageFromObjects(win *authorWindow) {
	if first := earliest(win.dirty, nil, func(k ObjectKey) time.Time { return q.since[k] }); !first.IsZero() {
		win.First = first
	}
}

func (q *queue) window(author string) *authorWindow {
	win := q.windows[author]
	if win == nil {
		win = &authorWindow{author: author, dirty: map[ObjectKey]intent{}}
		q.windows[author] = win
	}
	return win
}

// request attaches r, arrived at now, to its author's open window, which then closes once
// quiet (askedDue), or parks it until the author's next change.
func (q *queue) request(r *CommitRequest, now time.Time) {
	if r.withdrawn {
		return // forgotten while it was handed over
	}
	if win := q.windows[r.Author]; win != nil && len(win.dirty) > 0 && !win.listed {
		win.requests, win.askedAt = append(win.requests, r), now
		win.notBefore = time.Time{} // no longer held back: the request learns what it waits for
		return
	}
	if win := q.closing(r); win != nil {
		win.joined, win.joinedLate = append(win.joined, r), true
		return
	}
	q.waiting[r.Author] = append(q.waiting[r.Author], r)
}

// takeJoined moves the requests that joined win while it was being committed to its
// requests, which it returns, less the withdrawn ones: they are answered as the window's.
// Only the worker committing win calls it, under qmu.
func takeJoined(win *authorWindow) []*CommitRequest {
	win.requests = live(append(slices.Clip(win.requests), win.joined...))
	win.joined = nil
	return slices.Clone(win.requests)
}

// closing is the window of r's author being committed whose commit message is not made
// yet (messageMade), which r then joins (authorWindow.joined): a request created within the
// quiet period after the author's change, but handed over once the window closed (the
// controller's latency, another window's push before this one's), would otherwise wait for
// a next change and time out. Not a request still to look at the branch for an earlier
// leader's commit (lookBack): that look comes first (windowDue).
func (q *queue) closing(r *CommitRequest) *authorWindow {
	if r.lookBack {
		return nil
	}
	for _, win := range q.flushing {
		if win.author == r.Author && len(win.dirty) > 0 && !win.listed && !win.messageMade {
			return win
		}
	}
	return nil
}

// askedQuiet is how long a window its author asked to commit waits, after the request and
// her last change, for no more of her changes: `kubectl apply -f dir/` followed by a
// CommitRequest may have changes of some resources still on their way from their watches
// when the request arrives, and committing at once would leave them out of the commit
// that carries the message. askedWait bounds it: an author who keeps changing something
// (a controller's account) does not hold her request's commit back for maxDelay.
const (
	askedQuiet = 500 * time.Millisecond
	askedWait  = 2 * time.Second
)

// askedDue decides whether win, which its author asked to commit (askedAt), must commit at
// now by the request: quiet for askedQuiet since the later of the request and her last
// change, or askedWait after the request. A quiet shorter than askedQuiet closes the
// window by Due, from her last change, as always. Pure.
func askedDue(win *authorWindow, cfg WindowConfig, now time.Time) (bool, time.Duration) {
	last := win.Last
	if win.askedAt.After(last) {
		last = win.askedAt
	}
	return Due(Window{First: win.askedAt, Last: last, Count: win.Count},
		WindowConfig{Quiet: min(cfg.Quiet, askedQuiet), MaxDelay: askedWait}, now)
}

// lookBackRetry is how soon a pass looks again for an earlier leader's commit of a request
// whose look failed.
const lookBackRetry = 2 * time.Second

// due picks the windows that must commit at now, oldest first, and detaches them from the
// queue; wait is how long until the next one must (0 when none is open).
func (q *queue) due(cfg WindowConfig, now time.Time) (out []*authorWindow, wait time.Duration) {
	for _, win := range q.windows {
		commit, in := windowDue(win, cfg, now)
		if commit {
			out = append(out, win)
			continue
		}
		if in > 0 && (wait == 0 || in < wait) {
			wait = in
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].First.Equal(out[j].First) {
			return out[i].First.Before(out[j].First)
		}
		return out[i].author < out[j].author
	})
	for _, win := range out {
		q.detach(win)
	}
	return out, wait
}

// windowDue says whether win must commit at now, else how long until it may have to (0:
// nothing of time will make it). Pure.
func windowDue(win *authorWindow, cfg WindowConfig, now time.Time) (bool, time.Duration) {
	if now.Before(win.notBefore) {
		return false, win.notBefore.Sub(now)
	}
	if slices.ContainsFunc(win.requests, func(r *CommitRequest) bool { return r.lookBack }) {
		// A request whose look for an earlier leader's commit failed (worker.lookBack):
		// committing its message now could commit it a second time. The look is tried
		// again on the next pass, until the request's lookBackUntil.
		return false, lookBackRetry
	}
	ok, in := Due(win.Window, cfg, now)
	if byRequest, at := askedDue(win, cfg, now); !ok && !win.askedAt.IsZero() && (byRequest || at < in) {
		ok, in = byRequest, at
	}
	if ok || win.now || (len(win.requests) > 0 && len(win.dirty) == 0) {
		return true, 0
	}
	return false, in
}

// detach takes win out of the queue for its commit: the objects it owns leave the queue's
// bookkeeping with it (when each was first changed, its co-authors).
func (q *queue) detach(win *authorWindow) {
	delete(q.windows, win.author)
	win.since = make(map[ObjectKey]time.Time, len(win.dirty))
	for k := range win.dirty {
		if q.owner[k] != win.author {
			continue
		}
		delete(q.owner, k)
		delete(q.touched, k)
		win.since[k] = q.since[k]
		delete(q.since, k)
		if names, ok := q.coAuthors[k]; ok {
			if win.coAuthors == nil {
				win.coAuthors = map[ObjectKey][]string{}
			}
			win.coAuthors[k] = names
			delete(q.coAuthors, k)
		}
	}
}

// delivered ends the commit of win, pushed: a change of its objects from now on is a new
// one. What a list brought meanwhile waited with win's author only so that a failed push
// would give it back to them (relist); pushed, their change is in Git, and the list's is
// nobody's known change: it goes to the committer's window, never by a guess to theirs.
func (q *queue) delivered(win *authorWindow, now time.Time) {
	q.flushing = without(q.flushing, win)
	if joined := live(win.joined); len(joined) > 0 { // no commit carried them
		q.waiting[win.author] = append(q.waiting[win.author], joined...)
	}
	win.joined = nil
	cur := q.windows[win.author]
	if cur == nil || !cur.listed {
		return
	}
	for k, in := range cur.dirty {
		q.add(k, in, "", now)
		q.windows[""].compared = q.windows[""].compared || cur.compared
	}
}

// restore puts a window back after a failed commit. Objects someone changed since then
// stay where that change put them; the request stays attached. The window keeps its age:
// maxDelay and the apply→commit latency count from its first change, not from the failure.
func (q *queue) restore(win *authorWindow, now time.Time) {
	// Its objects are the queue's again: counted once, not also as being committed.
	q.flushing = without(q.flushing, win)
	joined := false // some object went back to the author's window
	existed := q.windows[win.author] != nil
	for k, in := range win.dirty {
		if owner, taken := q.owner[k]; taken {
			joined = joined || owner == win.author
			q.restoreChanged(win, owner, k, in)
			continue
		}
		q.restoreObject(win, k, in, now)
		joined = true
	}
	requests := live(append(slices.Clip(win.requests), win.joined...))
	win.joined = nil
	if len(requests) > 0 {
		cur := q.window(win.author)
		cur.requests, cur.now = append(requests, cur.requests...), true
	}
	q.mergeRestored(win, joined, existed)
}

// restoreChanged puts back an object of the failed window win that owner changed since: it
// stays in owner's window, which keeps a delete win saw before the failure, and its age.
func (q *queue) restoreChanged(win *authorWindow, owner string, k ObjectKey, in intent) {
	cur := q.windows[owner]
	if cur == nil {
		return
	}
	if newer, held := cur.dirty[k]; held {
		cur.dirty[k] = in.merge(newer)
		q.coAuthor(k, win.coAuthors[k]...)
		if owner != win.author && !win.listed { // its change, not pushed, waits with theirs
			q.coAuthor(k, win.author)
		}
	}
	cur.failed = cur.failed || win.failed
	if at := win.sinceOf(k); !at.IsZero() {
		q.dirtySince(k, at)
		if at.Before(cur.First) {
			cur.First = at
		}
	}
}

// restoreObject puts back an object of the failed window win nobody changed since, into its
// author's window.
func (q *queue) restoreObject(win *authorWindow, k ObjectKey, in intent, now time.Time) {
	cur := q.window(win.author)
	cur.dirty[k] = in
	q.coAuthor(k, win.coAuthors[k]...)
	cur.Count = len(cur.dirty)
	q.owner[k] = win.author
	q.touch(k)
	if first := win.First; cur.First.IsZero() || (!first.IsZero() && first.Before(cur.First)) {
		cur.First = first
	}
	if cur.First.IsZero() {
		cur.First = now
	}
	if at := win.sinceOf(k); !at.IsZero() {
		q.dirtySince(k, at)
	} else {
		q.dirtySince(k, cur.First)
	}
	// Its silence counts from its last change, not from the failure: the worker's
	// backoff (retryAt), not another quiet period, says when it is tried again.
	if cur.Last.Before(win.Last) {
		cur.Last = win.Last
	}
	if cur.Last.IsZero() {
		cur.Last = now
	}
}

// mergeRestored carries the failed window win's state into the author's window it went
// back to: joined says some object of win went there, existed that the window was open
// before.
func (q *queue) mergeRestored(win *authorWindow, joined, existed bool) {
	cur := q.windows[win.author]
	if cur == nil {
		return
	}
	// A window relist opened (listed) holds the author's own changes again once those of a
	// window of theirs come back to it; one made for a listed window's objects holds only
	// what a list brought.
	if joined && !win.listed {
		cur.listed = false
	} else if joined && !existed {
		cur.listed = true
	}
	// Merged into a window the author opened meanwhile, its objects keep their first
	// build, as the window keeps its first change.
	if joined && (cur.builtAt.IsZero() || !win.builtAt.IsZero() && win.builtAt.Before(cur.builtAt)) {
		cur.builtAt = win.builtAt
	}
	if joined {
		cur.tried = lastKept(append(cur.tried, win.tried...))
	}
	cur.failed = cur.failed || win.failed
	cur.compared = cur.compared || win.compared
	cur.forgot = cur.forgot || win.forgot
}

// lookingBack takes the queue's requests, waiting or riding a window, that have not
// searched the branch for an earlier leader's commit yet (CommitRequest.lookBack), and
// clears their flag: each searches once.
func (q *queue) lookingBack() []*CommitRequest {
	var out []*CommitRequest
	take := func(rs []*CommitRequest) {
		for _, r := range rs {
			if r.lookBack {
				r.lookBack = false
				out = append(out, r)
			}
		}
	}
	for _, rs := range q.waiting {
		take(rs)
	}
	for _, win := range q.windows {
		take(win.requests)
	}
	return out
}

// requests lists the queue's requests, waiting or riding an open window.
func (q *queue) requests() []*CommitRequest {
	out := q.attached()
	for _, rs := range q.waiting {
		out = append(out, rs...)
	}
	return out
}

// attached lists the requests on the queue's open windows.
func (q *queue) attached() []*CommitRequest {
	var out []*CommitRequest
	for _, win := range q.windows {
		out = append(out, win.requests...)
	}
	return out
}

// live is requests without the withdrawn ones, in a new slice.
func live(requests []*CommitRequest) []*CommitRequest {
	var out []*CommitRequest
	for _, r := range requests {
		if !r.withdrawn {
			out = append(out, r)
		}
	}
	return out
}

// retry puts back a window whose commit failed: restore, and the requests that came while
// it was being committed (they waited for a change) ride it, since the author's changes
// are pending again, as add would attach them.
func (q *queue) retry(win *authorWindow, now time.Time) {
	q.restore(win, now)
	if cur := q.windows[win.author]; cur != nil && len(cur.dirty) > 0 && !cur.listed && len(q.waiting[win.author]) > 0 {
		cur.requests = append(cur.requests, q.waiting[win.author]...)
		delete(q.waiting, win.author)
	}
}

// declinedAny says whether a window of the queue is held back because the server declined
// its commit.
func (q *queue) declinedAny() bool {
	for _, win := range q.windows {
		if win.declined {
			return true
		}
	}
	return false
}

// decline puts back a window whose commit the server declined, as failed, held back with a
// backoff of its own (1 s doubling to 2 min) whatever its author changed while it was
// pushed: what the server refused is still in it. A change to an object it held, made
// meanwhile or later (queue.add), perhaps the fix, ends the hold within a second, unless
// this push was itself such a quick try (the step then runs its course, steady); a
// CommitRequest ends the hold.
func (q *queue) decline(win *authorWindow, now time.Time) {
	win.failed = true
	fix, asked := false, false // while it was pushed: a held object changed; a request came
	if cur := q.windows[win.author]; cur != nil {
		for k := range cur.dirty {
			if _, held := win.dirty[k]; held {
				fix = true
			}
		}
		asked = len(cur.requests) > 0
	}
	parked := len(q.waiting[win.author])
	q.retry(win, now)
	cur := q.windows[win.author]
	if cur == nil {
		return
	}
	// Only requests that ride the window end its hold: one left parked (a window a relist
	// opened takes none) would release it at every decline, a push in a loop.
	asked = asked || parked > 0 && len(q.waiting[win.author]) == 0
	if !asked && !holdsAny(cur, win) {
		return // all it held went to other authors' windows: the author's new ones owe nothing
	}
	cur.declined = true
	cur.deferrals = win.deferrals + 1
	quick := win.shortened // this push was a quick try of a possible fix
	cur.shortened, cur.steady = false, false
	switch {
	case asked:
		cur.notBefore = time.Time{}
	case fix && !quick:
		cur.notBefore, cur.shortened = now.Add(time.Second), true
	default:
		cur.notBefore = now.Add(min(time.Second<<min(win.deferrals, 7), 2*time.Minute))
		cur.steady = quick
	}
}

// holdsAny reports whether cur holds an object of win.
func holdsAny(cur, win *authorWindow) bool {
	for k := range win.dirty {
		if _, ok := cur.dirty[k]; ok {
			return true
		}
	}
	return false
}

// deferWindow holds back a window whose objects all wait for their cache (holdBack).
func (q *queue) deferWindow(win *authorWindow, now time.Time) {
	win.failed = false // waiting for the cache is no write failure: this attempt got that far
	q.holdBack(win, now)
}

// holdBack puts back a window (as retry) and, when its author changed nothing else
// meanwhile, holds it back with a backoff of its own (1 s doubling to 2 min): the target's
// other windows go on. A request attaching to it, or a new change of its author, ends the
// wait; so does a request that came while it was tried, which is tried at once, to learn
// what it waits for: its author's changes before it were in that attempt.
func (q *queue) holdBack(win *authorWindow, now time.Time) {
	parked := len(q.waiting[win.author])
	q.retry(win, now)
	cur := q.windows[win.author]
	if cur == nil {
		return
	}
	if parked > 0 && len(q.waiting[win.author]) == 0 || win.joinedLate {
		cur.now, cur.notBefore = true, time.Time{}
		return
	}
	for k := range cur.dirty {
		if _, ok := win.dirty[k]; !ok {
			return // new changes: the next attempt commits them, deferring the rest again
		}
	}
	cur.deferrals = win.deferrals + 1
	cur.notBefore = now.Add(min(time.Second<<min(win.deferrals, 7), 2*time.Minute))
}

// expired removes and returns the waiting requests whose deadline passed; wait is how long
// until the next deadline (0 when none waits). One that has not searched its branch for an
// earlier leader's commit yet (lookBack) ends at its lookBackUntil if that is later, and,
// when its target looks (looks: it has read its branch, worker.lookBack), has a pass
// within lookBackRetry until then: a look that failed is tried again, as for a request
// riding a window (due).
func (q *queue) expired(now time.Time, looks bool) (out []*CommitRequest, wait time.Duration) {
	for author, rs := range q.waiting {
		kept := rs[:0]
		for _, r := range rs {
			end := r.Deadline
			if r.lookBack && r.lookBackUntil.After(end) {
				end = r.lookBackUntil
			}
			if !now.Before(end) {
				out = append(out, r)
				continue
			}
			kept = append(kept, r)
			in := end.Sub(now)
			if looks && r.lookBack && now.Before(r.lookBackUntil) {
				in = min(in, lookBackRetry)
			}
			if wait == 0 || in < wait {
				wait = in
			}
		}
		if len(kept) == 0 {
			delete(q.waiting, author)
		} else {
			q.waiting[author] = kept
		}
	}
	return out, wait
}

// withdraw forgets a request wherever it waits or is attached (its object was deleted), and
// flags it: a request being handed to the queue while it is forgotten lends no message. It
// matches the request itself, not its name: one created again under the name stays.
func (q *queue) withdraw(gone *CommitRequest) {
	gone.withdrawn = true
	drop := func(rs []*CommitRequest) []*CommitRequest {
		kept := rs[:0]
		for _, r := range rs {
			if r != gone {
				kept = append(kept, r)
			}
		}
		return kept
	}
	for author, rs := range q.waiting {
		if q.waiting[author] = drop(rs); len(q.waiting[author]) == 0 {
			delete(q.waiting, author)
		}
	}
	for author, win := range q.windows {
		if win.requests = drop(win.requests); len(win.requests) == 0 {
			win.askedAt = time.Time{} // no request left: its author's changes keep their quiet time
			if len(win.dirty) == 0 {
				delete(q.windows, author)
			}
		}
	}
	// A window being committed keeps it in its list (its plan reads it without the lock):
	// flagged above, not cut.
}

// holds reports whether key is dirty in some window, one being committed included.
func (q *queue) holds(key ObjectKey) bool {
	if _, ok := q.owner[key]; ok {
		return true
	}
	for _, win := range q.flushing {
		if _, ok := win.dirty[key]; ok {
			return true
		}
	}
	return false
}

// mergeOlder folds into the window holding key what a change older than that window's
// carried (a delete seen stays one; create-only only when both were). A window being
// committed is left alone: its plan reads it without the queue's lock.
func (q *queue) mergeOlder(key ObjectKey, older intent) {
	if win := q.windows[q.owner[key]]; win != nil {
		if held, ok := win.dirty[key]; ok {
			win.dirty[key] = older.merge(held)
		}
	}
}

// changes lists the queue's dirty objects as changes of target, each with the author
// whose window holds it and its co-authors; a list's change held with an author only for a
// failed push (listed) as no one's.
func (q *queue) changes(target types.NamespacedName) []Change {
	out := make([]Change, 0, len(q.owner))
	for _, win := range q.windows {
		for k, in := range win.dirty {
			c := Change{Target: target, Key: k, Deleted: in.deleted, CreateOnly: in.createOnly,
				Pruned: in.pruned, Author: win.author, CoAuthors: slices.Clone(q.coAuthors[k])}
			if win.listed { // a list's change, held with its author only for a failed push: nobody's
				c.Author, c.Relisted = "", true
			}
			out = append(out, c)
		}
	}
	return out
}

// failing reports whether a window put back after its commit failed waits for its retry.
func (q *queue) failing() bool {
	for _, win := range q.windows {
		if win.failed {
			return true
		}
	}
	return false
}

// without is wins less win, in a new slice: the worker ranges over the one it gave flushing.
func without(wins []*authorWindow, win *authorWindow) []*authorWindow {
	out := make([]*authorWindow, 0, len(wins))
	for _, w := range wins {
		if w != win {
			out = append(out, w)
		}
	}
	return out
}

// pending is the number of objects not yet pushed: dirty in a window, or in one being
// committed (its push may take minutes, and fail). An object changed again while its commit
// is pushed counts twice until the push ends: counting it once would cost a look through
// the committed windows at every change.
func (q *queue) pending() int {
	n := len(q.owner)
	for _, win := range q.flushing {
		n += len(win.dirty)
	}
	return n
}

// oldest is when the oldest change of the queue not yet pushed was recorded, a window being
// committed included (its push may fail); zero when there is none. A window that failed
// keeps its opening time (restore), so a delivery that keeps failing keeps getting older.
func (q *queue) oldest() time.Time {
	var oldest time.Time
	older := func(win *authorWindow) {
		if len(win.dirty) > 0 && !win.First.IsZero() && (oldest.IsZero() || win.First.Before(oldest)) {
			oldest = win.First
		}
	}
	for _, win := range q.windows {
		older(win)
	}
	for _, win := range q.flushing {
		older(win)
	}
	return oldest
}

// CommitRequest asks the writer to commit an author's pending changes on a target now, with
// a message; see the CommitRequest kind.
type CommitRequest struct {
	// Key names the CommitRequest object the outcome is reported to.
	Key types.NamespacedName
	// UID tells a request from one created again under the same name (delete and create,
	// kubectl replace --force) before the first one's deletion was seen.
	UID    types.UID
	Target types.NamespacedName
	// Author is the requester's username; only their own changes are committed.
	Author  string
	Message string
	// Deadline ends the wait for the author's next change when none is pending.
	Deadline time.Time
	// Created is when the CommitRequest object was made (zero: unknown).
	Created time.Time
	// Claimed lists the commits other CommitRequests of the target by the same requester
	// report as theirs (their status.sha), and those of them still waiting, by request. It
	// is called only when the request searches the branch for an earlier leader's commit
	// (lookBack): a commit carries a message once per request its window committed for,
	// and the copies other requests take are not this one's (a pipeline asking again with
	// the same message within lookBack's minute of clock skew, or two requests the earlier
	// leader had not answered, of which it committed one). Nil: none known. An error (the
	// requests could not be listed) makes the look inconclusive: it is made again, as when
	// the branch's history could not be fetched.
	Claimed func() (map[types.NamespacedName]Claim, error)
	// lookBack is set on a request created before this replica started leading, and cleared
	// once the branch was searched for a commit an earlier leader made with its message (its
	// status not written before it died): answered so, the message is not committed twice.
	lookBack bool
	// lookBackUntil is how long a request with lookBack still set outlives its Deadline:
	// while its target has not read its branch (a fetch failing after a leader change), a
	// timeout would end it though the earlier leader may have pushed its message. Two Git
	// timeouts after this replica started leading, as Manager.recovering waits.
	lookBackUntil time.Time
	// beforeStart is set on a request created before this replica started leading, for good:
	// a change of its requester made before then is committed by the initial snapshot,
	// under the committer, so its time out says so rather than that no change came.
	beforeStart bool
	// attempted are the commits carrying the message whose push reported an error; one of
	// them may have landed all the same (the answer lost, the remote unreachable to check).
	attempted []plumbing.Hash
	// withdrawn is set, under the worker's qmu, when the request's object is gone while a
	// window carrying it is being committed: its message is left out of that commit if there
	// is still time, and of any retry.
	withdrawn bool
}

// Claim is a commit a CommitRequest reports as its own, with that request's message: the
// commit carries the message's paragraphs, which a request looking for its own message
// (lookBack) cannot take. SHA is empty for a request still waiting (neither answered nor
// settled otherwise): a commit made after its creation (Created) may be its own, and so
// is, certainly, any of the commits its pushes tried whose answers were lost (Attempted).
type Claim struct {
	SHA, Message string
	Created      time.Time
	Attempted    []string
}

// RequestOutcome is what became of a CommitRequest.
type RequestOutcome struct {
	// Done is false while the request waits or its commit is still being pushed.
	Done bool
	// SHA is the pushed commit, empty when none was made.
	SHA string
	// Reason is a CamelCase reason for the Committed condition.
	Reason  string
	Message string
}
