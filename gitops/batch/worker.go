package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// maxPushAttempts bounds fetch-and-replay rounds within one flush; the flush is retried
// later with backoff when they are exhausted.
const maxPushAttempts = 5

// minFetchInterval keeps status refreshes (one per commit) from fetching every time.
const minFetchInterval = 5 * time.Second

// target is the worker's state for one GitTarget.
type target struct {
	spec    TargetSpec
	verdict layout.Verdict
	// inside is the verdict on the folder's own files, before the Kustomize files outside
	// it are judged (verdict is the whole); the zero Verdict until the first analysis.
	inside layout.Verdict
	// style is the folder's YAML style (sequence indentation), used for new files.
	style manifest.Style
	// folderPath mirrors spec.Folder for readers outside the worker's lock.
	folderPath atomic.Pointer[string]
	// index is swapped whole on re-analysis; admission reads it without the worker's lock.
	index atomic.Pointer[folderIndex]
	st    TargetStatus
	// rekeyFailed is why the last re-wrap of the folder's encrypted files (syncKeys) did
	// not land, shown as st.LastError while no window's failure is; a window that commits
	// does not clear it. The re-wrap is tried again at a registration after rekeyRetryAt
	// (rekeyBackoff: 1 s doubling to 2 minutes), or at once when the folder, the
	// recipients or the credentials change.
	rekeyFailed  string
	rekeyBackoff time.Duration
	rekeyRetryAt time.Time
	// untried says the target's credentials changed and no fetch with them succeeded yet:
	// each registration fetches until one does, whatever another target fetched meanwhile
	// with its own.
	untried bool
	// refused holds why each object the writer would not write was left out, until a
	// later plan of that object writes, skips or removes it; st.Refused lists it.
	refused map[ObjectKey]string

	// q is this target's queue of per-author windows; guarded by worker.qmu. It lives apart
	// from the Git-side state so that recording a change never waits for a commit or push
	// in progress: a window measures the silence of incoming changes, not of the worker.
	q *queue
	// backoff grows with each failed commit of this target (up to 2 minutes); its
	// windows wait until retryAt. Per target, so one that keeps failing (a read-only
	// token, a protected branch) does not slow the others of its branch.
	backoff time.Duration
	retryAt time.Time
	// collapsedAt is when collapseDeletes last looked at the target's waiting changes of
	// gone objects.
	collapsedAt time.Time
	// doubtAt is when a commit of the target last may have reached the remote though its
	// push reported an error (attempted): until the next fetch shows the branch (lastFetch),
	// the index may lack what it wrote, whichever window now holds its objects (doubted).
	doubtAt time.Time
	// orphans holds, per resource, the documents whose objects a full list did not find
	// and that were kept; only those Git still holds count (orphanCount), so a removal
	// waiting at the list (a deletion recovered after a restart) counts only until pushed.
	orphans map[schema.GroupVersionResource]map[manifest.Identity]bool
	// folderReady says the folder became writable (or is new) since OnFolderReady was
	// last called for it. Whichever path re-read it (this target's registration, another
	// target's fetch, a push replay) sets the flag; the next release of the worker's lock
	// reports it.
	folderReady bool
	// unread is why the last registration could not read the branch, while it never could
	// (st.Known false): the requests riding the target's windows say so, not that they wait.
	unread error
	// hidden is ErrBranchHidden while the target's own credentials do not see the branch
	// that another target's do (refresh): its windows wait, and are not committed from
	// another's view of the branch; their requests say why.
	hidden error
}

// worker serialises every Git operation of one (repository, branch).
type worker struct {
	key  workerKey
	repo *repo.Repo
	opts Options
	log  logr.Logger
	// watchedOf is Manager.watchedOf, for view; nil in tests of a worker alone.
	watchedOf func(types.NamespacedName) (map[schema.GroupVersionResource]bool, bool)

	// mu guards the clone, remoteTip and targets' Git-side state.
	mu sync.Mutex
	// remoteSince is when the fetch or push in progress began (Unix nanoseconds; 0: none),
	// read without mu, which it runs under: a registration does not queue behind a remote
	// that stopped answering (remoteStuck).
	remoteSince atomic.Int64
	remoteTip   plumbing.Hash
	// tipBeforeRepair is the remote tip a rebuild of the clone forgot, so that the fetch
	// after it still tells a branch someone deleted meanwhile (see refresh).
	tipBeforeRepair plumbing.Hash
	// seenBy is the target whose credentials last saw the branch (fetched or pushed it):
	// when another target's fetch finds no branch, refresh asks them again (see seenElsewhere).
	seenBy    types.NamespacedName
	fetched   bool
	lastFetch time.Time
	targets   map[types.NamespacedName]*target
	// kustomizations finds the repository's Kustomize files for kustomizeOutside,
	// re-reading only the directories a commit changed; kustomizeRefs keeps what each of
	// those the last search found refers to, by blob, so each is read and parsed once.
	kustomizations *repo.FileFinder
	kustomizeRefs  map[plumbing.Hash]layout.KustomizeRefs

	// qmu guards queues (and every queue's fields), so submitting never waits for a push.
	qmu    sync.Mutex
	queues map[types.NamespacedName]*queue
	wake   chan struct{}
	// outcome reports what became of a CommitRequest (the Manager keeps it). It takes the
	// Manager's lock while w.mu is held; that is safe because no path takes a worker's lock
	// while holding the Manager's (moveAway and RemoveTarget release it first). answers
	// collects a flush's outcomes, reported before w.mu is released, so a target's removal
	// (which waits for w.mu) never overtakes a commit that carried a request's message.
	outcome func(*CommitRequest, RequestOutcome)
	answers []answer

	// stop ends the loop and done is closed once it ended; both are set when the Manager
	// runs the worker (guarded by the Manager's lock). retired, guarded by qmu, keeps a
	// late pending-count report from bringing back the metric series retire removed.
	stop    context.CancelFunc
	done    chan struct{}
	retired bool
	// journal is the Manager's record of deletions not written yet (nil: none kept).
	journal *deleteJournal
	// draining is set, under mu, once a stop commits every open window (drain).
	draining bool
}

// answer is a CommitRequest outcome waiting to be reported.
type answer struct {
	req *CommitRequest
	out RequestOutcome
}

func newWorker(key workerKey, r *repo.Repo, opts Options, outcome func(*CommitRequest, RequestOutcome)) *worker {
	return &worker{
		key: key, repo: r, opts: opts, outcome: outcome,
		log:            opts.Log.WithValues("repository", key.url, "branch", key.branch),
		targets:        map[types.NamespacedName]*target{},
		kustomizations: repo.NewFileFinder(layout.KustomizationNames()...),
		queues:         map[types.NamespacedName]*queue{},
		wake:           make(chan struct{}, 1),
	}
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// submit records changes under one lock, so a snapshot's thousands of changes reach the
// worker as one window instead of racing its flushes. It returns the changes of targets
// it has no queue for (not registered yet, or gone), for the Manager to keep or drop.
func (w *worker) submit(changes ...Change) (unplaced []Change) {
	return w.enqueue(changes, false)
}

// submitOlder records changes seen before the queue's own (kept while the target was
// suspended or moving): an object the queue already holds stays in its newer window.
func (w *worker) submitOlder(changes ...Change) (unplaced []Change) {
	return w.enqueue(changes, true)
}

// enqueue records changes, after handing requests to their queues in the same hold of
// qmu (see Manager.unpark).
func (w *worker) enqueue(changes []Change, older bool, requests ...*CommitRequest) (unplaced []Change) {
	now := time.Now()
	placed := make([]Change, 0, len(changes))
	w.qmu.Lock()
	for _, r := range requests {
		if q, ok := w.queues[r.Target]; ok {
			q.request(r, now)
		}
	}
	for _, c := range changes {
		q, ok := w.queues[c.Target]
		switch {
		case !ok:
			unplaced = append(unplaced, c)
		case older && q.holds(c.Key):
			q.mergeOlder(c.Key, intentOf(c))
			q.creditOlder(c) // the newer change's record stands, with its author
			continue
		case c.Bookkeeping:
			q.note(c.Key, intentOf(c), c.Author, now)
		case c.Relisted && c.Author == "":
			q.relist(c.Key, intentOf(c), now)
		case c.Relisted: // the list after its creation, by someone the webhook did not see
			q.listedBy(c.Key, intentOf(c), c.Author, now)
		default:
			q.add(c.Key, intentOf(c), c.Author, now)
		}
		if ok {
			q.coAuthor(c.Key, c.CoAuthors...) // a parked change's credits (Change.CoAuthors)
			placed = append(placed, c)
		}
	}
	w.journal.record(placed...) // under qmu, as delivered drops entries: neither overtakes the other
	w.qmu.Unlock()
	w.reportPending()
	w.poke()
	return unplaced
}

// unreadWithChanges counts a failed commit for a target whose registration could not read
// its branch, which it never did, when changes wait on it: they cannot commit, and the
// "commits keep failing" alert must see an outage that began before the operator started.
// Called once the kept changes were handed over (Manager.unpark).
func (w *worker) unreadWithChanges(key types.NamespacedName) {
	w.qmu.Lock()
	q := w.queues[key]
	waiting := q != nil && len(q.windows) > 0
	w.qmu.Unlock()
	if waiting {
		w.opts.Metrics.failed(w.key)
	}
}

// request hands a CommitRequest to its target's queue; false when the target is unknown.
func (w *worker) request(r *CommitRequest) bool {
	w.qmu.Lock()
	q, ok := w.queues[r.Target]
	if ok {
		q.request(r, time.Now())
	}
	w.qmu.Unlock()
	w.poke()
	return ok
}

// withdraw forgets a CommitRequest whose object is gone.
func (w *worker) withdraw(r *CommitRequest) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if q, ok := w.queues[r.Target]; ok {
		q.withdraw(r)
	} else {
		r.withdrawn = true // under qmu, as every read of the flag
	}
}

// reportPending publishes the number of dirty objects on this worker and the time its
// oldest change not yet pushed was recorded. It counts and sets under qmu, so two reports
// cannot land in the opposite order of their counts.
func (w *worker) reportPending() {
	if w.opts.Metrics == nil {
		return
	}
	n := 0
	var oldest time.Time
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if w.retired {
		return
	}
	for _, q := range w.queues {
		n += q.pending()
		if first := q.oldest(); !first.IsZero() && (oldest.IsZero() || first.Before(oldest)) {
			oldest = first
		}
	}
	w.opts.Metrics.pending(w.key, n, oldest)
}

// retire releases what the worker holds once its loop ended and no target uses it: the
// clone's open files and caches, and its pending-changes series; with remove, the clone on
// disk too.
func (w *worker) retire(remove bool) {
	w.qmu.Lock()
	w.retired = true
	w.opts.Metrics.forget(w.key)
	w.qmu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if remove {
		if err := w.repo.Remove(); err != nil {
			w.log.Error(err, "deleting the local clone no GitTarget uses any more", "path", w.repo.Dir())
		}
		return
	}
	if err := w.repo.Close(); err != nil {
		w.log.Error(err, "closing the local clone of a worker no target uses any more")
	}
}

func (w *worker) status(key types.NamespacedName) (TargetStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.targets[key]
	if !ok {
		return TargetStatus{}, false
	}
	return w.view(t), true
}

// view is t's status as its controller shows it: status.orphans counts only the resources
// the target's rules watch now (Manager.Watched), all it has snapshots of until the
// watcher said. Callers hold w.mu.
func (w *worker) view(t *target) TargetStatus {
	st := t.st
	if st.LastError == "" {
		st.LastError = t.rekeyFailed
	}
	counted := everyResource
	if w.watchedOf != nil {
		if watched, known := w.watchedOf(t.spec.Key); known {
			counted = func(gvr schema.GroupVersionResource) bool { return watched[gvr] }
		}
	}
	st.Orphans = t.orphanCount(counted)
	st.BranchEmpty = st.Known && w.fetched && w.remoteTip.IsZero() // a rebuilt clone knows no tip until it fetched
	return st
}

// everyResource counts the orphans of every resource a target has snapshots of.
func everyResource(schema.GroupVersionResource) bool { return true }

// orphanCount counts the kept orphans Git still holds, of the resources counted says.
// Callers hold w.mu.
func (t *target) orphanCount(counted func(schema.GroupVersionResource) bool) int {
	ix := t.index.Load()
	if ix == nil {
		return 0
	}
	n := 0
	for gvr, ids := range t.orphans {
		if !counted(gvr) {
			continue
		}
		for id := range ids {
			if _, ok := ix.lookup(id); ok {
				n++
			}
		}
	}
	return n
}

// openQueue returns the target's queue, made when missing; it takes only qmu, so it never
// waits for a commit or push in progress.
func (w *worker) openQueue(key types.NamespacedName) *queue {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	q := w.queues[key]
	if q == nil {
		q = newQueue()
		w.queues[key] = q
	}
	return q
}

// removeTarget drops the target and returns the changes its queue still held (they are no
// longer this worker's pending work). A target suspended here (keep) leaves its folder's
// index in the clone, so that coming back parses only the files that changed meanwhile; one
// that leaves the clone takes its saved index along (forgetSavedIndex).
func (w *worker) removeTarget(key types.NamespacedName, keep bool) []Change {
	changes, _ := w.remove(key, keep)
	return changes
}

// remove is removeTarget that also returns, for a target suspended here (keep), what the
// worker knew of its folder (parkedJudge), judged in the same hold as the removal.
func (w *worker) remove(key types.NamespacedName, keep bool) ([]Change, *parkedJudge) {
	var judge *parkedJudge
	w.mu.Lock()
	if t := w.targets[key]; t != nil {
		delete(w.targets, key)
		if keep {
			w.saveIndexOf(key, t)
			judge = &parkedJudge{ix: t.index.Load(), sound: t.st.Known && !t.stale(w.remoteTip) && !w.doubted(t),
				wk: w.key, folder: t.spec.Folder, touched: map[ObjectKey]uint64{}}
		} else {
			w.forgetSavedIndex(t.spec.Folder)
		}
	}
	w.mu.Unlock()
	defer w.reportPending()
	w.qmu.Lock()
	defer w.qmu.Unlock()
	q := w.queues[key]
	delete(w.queues, key)
	if q == nil {
		return nil, judge
	}
	for _, win := range q.windows {
		if judge != nil && inDoubt(win) {
			judge.sound = false // a push of it may have landed: its index may lack what it wrote
		}
	}
	if judge != nil && !judge.sound {
		judge.ix = nil // never read: not kept in memory while the target is suspended
	}
	return q.changes(key), judge
}

// credentialsChanged reports whether a registration brings other credentials than the one
// before, so a target backing off retries at once: by AuthVersion when both have one (a
// controller builds SSH credentials again on every reconcile, each time with a new host-key
// callback, which reflect.DeepEqual never finds equal), else by value. Pure.
func credentialsChanged(before, after TargetSpec) bool {
	if before.AuthVersion != "" && after.AuthVersion != "" {
		return before.AuthVersion != after.AuthVersion
	}
	return !reflect.DeepEqual(before.Auth, after.Auth)
}

// sameRecipients says whether two encryption settings wrap files for the same recipients.
func sameRecipients(a, b *Encryption) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Recipients, b.Recipients)
}

// ensureTarget registers the target, fetches the branch and re-reads folders when the
// remote moved. It reports a folder that became writable, or a new folder, through
// OnFolderReady.
func (w *worker) ensureTarget(ctx context.Context, spec TargetSpec) (*target, TargetStatus, error) {
	w.mu.Lock()
	t, ok := w.targets[spec.Key]
	if !ok {
		t = &target{spec: spec, q: w.openQueue(spec.Key)}
		w.targets[spec.Key] = t
	}
	wasHidden := t.hidden != nil
	oldFolder := t.spec.Folder
	folderChanged, retryNow := false, false
	if ok {
		folderChanged, retryNow = w.respec(t, spec)
	}
	// The loop may sleep on an open window's old quiet or maxDelay, up to an hour.
	windowChanged := ok && t.spec.Window != spec.Window
	t.spec = spec
	t.folderPath.Store(&spec.Folder)
	if folderChanged {
		w.forgetSavedIndex(oldFolder) // once t no longer writes it
	}
	w.actFor(spec)
	var err error
	// New credentials are tried until they fetch: another target's fetch a moment ago,
	// with its own, says nothing of them.
	// So is a target the branch is hidden from (ErrBranchHidden): the others' fetches say
	// nothing of what its own credentials see, when access comes back or is taken away
	// without the credentials changing.
	if !t.st.Known || folderChanged || t.untried || t.hidden != nil || time.Since(w.lastFetch) > minFetchInterval {
		err = w.refreshTarget(ctx, t, folderChanged)
	}
	t.unread = nil
	if err != nil && !t.st.Known {
		t.unread = err
	}
	unread := t.unread != nil
	shown := wasHidden && t.hidden == nil // its windows waited for this: the loop does not look at them
	st := w.view(t)
	ready := w.takeReady()
	w.mu.Unlock()
	w.reportReady(ready)
	if retryNow || unread || shown || windowChanged {
		w.poke() // the loop sleeps until the old backoff's retry otherwise; requests learn why they wait
	}
	if err != nil {
		return t, st, err
	}
	return t, st, nil
}

// respec prepares the registered target t for its new spec, before it takes it: what the
// change of folder, credentials, prune mode, recipients or encryption means for its
// retries and its next snapshot. It returns whether the folder changed and whether the
// credentials did (try them now). It changes nothing else: t.spec is still the old one.
// Callers hold w.mu.
func (w *worker) respec(t *target, spec TargetSpec) (folderChanged, retryNow bool) {
	folderChanged = t.spec.Folder != spec.Folder
	retryNow = credentialsChanged(t.spec, spec)
	if retryNow {
		t.backoff, t.retryAt = 0, time.Time{} // new credentials: try them now
		t.untried = true
	}
	if t.spec.Prune != spec.Prune && (t.spec.Prune == PruneAlways || spec.Prune == PruneAlways) && t.st.Known {
		// A snapshot prunes now the orphans the old mode kept, or counts again those it
		// was pruning and the new mode keeps.
		t.folderReady = true
	}
	if rekeyMoot := folderChanged || !sameRecipients(t.spec.Encryption, spec.Encryption); retryNow || rekeyMoot {
		// A re-wrap that failed is tried with them at once, from the start of its backoff.
		// Its failure stands until that try, unless the folder or the recipients it was
		// about changed.
		t.rekeyRetryAt, t.rekeyBackoff = time.Time{}, 0
		if rekeyMoot {
			t.rekeyFailed = ""
		}
	}
	if t.spec.Encryption == nil && spec.Encryption != nil && t.st.Known {
		// The sensitive objects refused while the target could not encrypt are written now,
		// not at their next change: a snapshot plans them again (the others, unchanged, are
		// confirmed by digest).
		t.folderReady = true
	}
	return folderChanged, retryNow
}

// refreshTarget fetches the branch for t and reads its folder (again, when the folder
// changed or was never read), repairing a damaged clone and compacting one that is due.
// Callers hold w.mu.
func (w *worker) refreshTarget(ctx context.Context, t *target, folderChanged bool) error {
	err := w.refresh(ctx, folderChanged || !t.st.Known, t)
	if err != nil && w.repairIfDamaged(ctx, err) {
		err = w.refresh(ctx, true, t)
	}
	if err == nil && w.compactIfDue() {
		// Every fetch that brings something adds a packfile; a target that only sees
		// people's commits would otherwise never compact (it happens after pushes).
		// A clone rebuilt there is fetched again before the target reads it.
		err = w.refresh(ctx, true, t)
	}
	if err == nil {
		t.untried = false
	}
	return err
}

// stale reports whether the target's index is not of its folder at tip: never read, read
// at another commit, or read from the folder the target had before its spec changed.
// Callers hold w.mu.
func (t *target) stale(tip plumbing.Hash) bool {
	ix := t.index.Load()
	return ix == nil || ix.describes() != tip || !ix.of(t.spec.Folder)
}

// takeReady returns the targets whose folder became writable, or is new, since they were
// last taken, and clears their flag. Callers hold w.mu and pass the result to reportReady
// once they released it.
func (w *worker) takeReady() []types.NamespacedName {
	var ready []types.NamespacedName
	for k, t := range w.targets {
		if t.folderReady {
			t.folderReady = false
			ready = append(ready, k)
		}
	}
	return ready
}

// reportReady asks for a snapshot of each folder that became writable (OnFolderReady): its
// objects were not written while it was refused, or it is new. Called without w.mu, since
// the snapshot submits changes to this worker.
func (w *worker) reportReady(keys []types.NamespacedName) {
	for _, k := range keys {
		w.opts.OnFolderReady(k)
	}
	if len(keys) > 0 {
		w.poke()
	}
}

// actFor makes the clone's next fetches and pushes use spec's credentials. Targets of
// different GitProviders can share a worker (one per repository and branch); each must
// reach the remote as its own provider, never with the token of whichever registered
// last, and read fetch and push errors naming its own address. Callers hold w.mu, which
// every fetch and push also runs under.
func (w *worker) actFor(spec TargetSpec) { w.repo.ActAs(spec.URL, spec.Auth) }

// refresh fetches the branch; when the tip moved (or force is set) every target's folder is
// re-read, and any folder whose index does not describe the tip. Callers hold w.mu.
func (w *worker) refresh(ctx context.Context, force bool, acting *target) error {
	var tip plumbing.Hash
	err := w.remote(ctx, func(ctx context.Context) (err error) {
		tip, err = w.repo.Fetch(ctx, w.key.branch)
		return err
	})
	if err != nil {
		return fmt.Errorf("fetching branch %s: %w", w.key.branch, err)
	}
	// A branch someone deleted: every folder on it is gone from Git while the cluster still
	// holds its objects. The next window alone would recreate the branch with its few
	// files, so each target also asks for a snapshot, which writes the whole folder.
	known := w.remoteTip
	if !w.fetched {
		known = w.tipBeforeRepair
	}
	tip, isHidden, err := w.hiddenFrom(ctx, acting, tip, known)
	if err != nil {
		return err
	}
	var hidden error
	if isHidden {
		hidden = fmt.Errorf("%w (another GitTarget's credentials see it): give this GitProvider's read access to it", ErrBranchHidden)
	}
	if acting != nil {
		acting.hidden = hidden
	}
	moved := !w.fetched || tip != w.remoteTip
	deleted := !known.IsZero() && tip.IsZero()
	w.tipBeforeRepair = plumbing.ZeroHash
	w.remoteTip, w.fetched, w.lastFetch = tip, true, time.Now()
	own := w.reread(tip, moved || force, deleted, acting, hidden)
	if hidden != nil {
		return hidden
	}
	return own
}

// hiddenFrom looks, when acting's fetch found no branch (tip) where the worker knew one
// (known), whether the credentials of another target on it still see it: then the branch is
// hidden from acting's, and the tip is the one the others see. It records whose credentials
// saw the branch last. Callers hold w.mu.
func (w *worker) hiddenFrom(ctx context.Context, acting *target, tip, known plumbing.Hash) (plumbing.Hash, bool, error) {
	if tip.IsZero() && !known.IsZero() {
		seen, err := w.seenElsewhere(ctx, acting)
		if err != nil || seen.IsZero() {
			return tip, false, err
		}
		return seen, true, nil
	}
	if !tip.IsZero() && acting != nil {
		w.seenBy = acting.spec.Key
	}
	return tip, false, nil
}

// reread re-reads each target's folder at tip when the tip moved (or a re-read is forced:
// moved), and any folder whose index does not describe it, but acting's when the branch is
// hidden from it; after the branch was deleted (deleted) each writable folder asks for its
// snapshot. It returns acting's own failure; the others' are logged. Callers hold w.mu.
func (w *worker) reread(tip plumbing.Hash, moved, deleted bool, acting *target, hidden error) error {
	var own error
	for _, t := range w.targets {
		if t == acting && hidden != nil {
			continue // it cannot read the branch: no index of it is made from another's view
		}
		// An index left behind by a failed re-read is read again, even when the tip did
		// not move since; one target's failure does not leave the others behind, nor
		// fail them: each learns of its own when it registers or commits.
		if moved || !t.st.Known || t.stale(tip) {
			if err := w.analyze(t); err != nil {
				if t == acting {
					own = err
				} else {
					w.log.Error(err, "re-reading a folder failed; retried at the next fetch", "gitTarget", t.spec.Key.String())
				}
			}
		}
		if deleted && t.verdict.Supported {
			t.folderReady = true
		}
	}
	return own
}

// ErrBranchHidden says a target's credentials cannot see its branch, though another
// target's, on the same branch, can: ref permissions (Gerrit's, say) hide it from them.
var ErrBranchHidden = errors.New("the branch is hidden from this GitTarget's credentials")

// seenElsewhere is called when acting's fetch found no branch where the worker knew one.
// When the credentials of another target on the branch saw it last, they fetch again: one
// provider's view must not read as the branch deleted, for every target of the worker
// (each would write its whole folder again, at each of acting's fetches). It returns the
// tip they see: ZeroHash when the branch is gone for them too, or no other credentials can
// tell (none differ, or the remote refuses them: acting is not held back by another
// tenant's revoked token or key: repo.Refused), which refresh takes as a deletion. Any other
// failure (the remote unreachable, rate-limited, a disk error) is an error, retried: it
// tells nothing either way. Callers hold w.mu and act for acting, as they do again on
// return.
func (w *worker) seenElsewhere(ctx context.Context, acting *target) (plumbing.Hash, error) {
	seer := w.otherEyes(acting)
	if seer == nil {
		return plumbing.ZeroHash, nil
	}
	w.actFor(seer.spec)
	var tip plumbing.Hash
	err := w.remote(ctx, func(ctx context.Context) (err error) { // a timeout of its own
		tip, err = w.repo.Fetch(ctx, w.key.branch)
		return err
	})
	w.actFor(acting.spec)
	switch {
	case err == nil:
		return tip, nil
	case repo.Refused(err): // the remote answered: these credentials may not read it
		w.log.Error(err, "fetching the branch with another target's credentials, to tell a branch hidden from these from one deleted: "+
			"refused, so taken as deleted", "gitTarget", acting.spec.Key.String(), "asked", seer.spec.Key.String())
		return plumbing.ZeroHash, nil
	default:
		// Not wrapped: its address is the other target's, as written in its GitProvider.
		w.log.Error(err, "fetching the branch with another target's credentials, to tell a branch hidden from these from one deleted",
			"gitTarget", acting.spec.Key.String(), "asked", seer.spec.Key.String())
		return plumbing.ZeroHash, fmt.Errorf("fetching branch %s: not found with this GitTarget's credentials, "+
			"and another GitTarget's, asked whether it was deleted, could not tell (the operator's log says why); retried", w.key.branch)
	}
}

// otherEyes picks the target whose credentials fetch again for seenElsewhere: the one that
// saw the branch last, unless it is gone or has acting's credentials now (rotated to
// ones the branch is hidden from, say); else any other whose credentials differ from
// acting's and see the branch, by name for a stable choice. Nil: none. Callers hold w.mu.
func (w *worker) otherEyes(acting *target) *target {
	if acting == nil {
		return nil
	}
	differs := func(u *target) bool { return u != acting && u.hidden == nil && credentialsChanged(u.spec, acting.spec) }
	if seer, ok := w.targets[w.seenBy]; ok && differs(seer) {
		return seer
	}
	var pick *target
	for _, u := range w.targets {
		if differs(u) && u.st.Known && (pick == nil || u.spec.Key.String() < pick.spec.Key.String()) {
			pick = u
		}
	}
	return pick
}

// errCloneRead marks a failed read of the local clone: a sign that the clone may be
// damaged, which repairIfDamaged then checks.
var errCloneRead = errors.New("reading the local clone")

// repairIfDamaged rebuilds the clone from the remote when err is a failed read of it and
// repo.Verify finds it damaged (an object lost or garbled by a disk fault, or by a kill
// while compaction deleted objects): retrying the same reads would fail forever, and a
// restart would trust the clone again. It reports whether the clone was rebuilt; the
// caller fetches before it reads again. Callers hold w.mu.
func (w *worker) repairIfDamaged(ctx context.Context, err error) bool {
	if !errors.Is(err, errCloneRead) && !errors.Is(err, plumbing.ErrObjectNotFound) {
		return false
	}
	damage := w.repo.Verify()
	if !errors.Is(damage, repo.ErrDamaged) {
		return false
	}
	w.log.Info("local clone is damaged; rebuilding it from the remote", "damage", damage.Error())
	if err := w.repo.Reset(); err != nil {
		w.log.Error(err, "rebuilding the local clone; retried at the next failure")
		return false
	}
	w.opts.Metrics.repaired()
	if w.fetched {
		w.tipBeforeRepair = w.remoteTip
	}
	w.fetched, w.remoteTip, w.lastFetch = false, plumbing.ZeroHash, time.Time{}
	return true
}

// push pushes sha over the remote tip (repo.Push), within Options.GitTimeout. Callers hold
// w.mu.
func (w *worker) push(ctx context.Context, sha plumbing.Hash) error {
	defer w.onRemote()()
	return w.repo.PushWithin(ctx, w.opts.gitTimeout(), w.key.branch, sha, w.remoteTip)
}

// slowRemote is how long a fetch or push may take before registrations on its branch stop
// waiting for it (remoteStuck).
const slowRemote = 10 * time.Second

// ErrRemoteBusy is a registration's answer while its branch's writer waits on a fetch or
// push that has taken longer than slowRemote: the remote is slow or stopped answering. It
// is retried with backoff, and the GitTarget controller's worker is free meanwhile for other
// GitTargets, instead of queueing behind the branch for up to the Git timeout (only the
// registration already running there waits: Manager.holdRegistrations).
var ErrRemoteBusy = errors.New("the remote has not answered the branch's fetch or push in progress")

// remote runs op, a fetch of the remote, bounded by --git-timeout and shown as a remote
// operation in progress (remoteStuck) while it runs. Callers hold w.mu.
func (w *worker) remote(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.gitTimeout())
	defer cancel()
	done := w.onRemote()
	defer done()
	return op(ctx)
}

// onRemote marks a fetch or push in progress; call what it returns when it is done.
func (w *worker) onRemote() (done func()) {
	w.remoteSince.Store(time.Now().UnixNano())
	return func() { w.remoteSince.Store(0) }
}

// remoteStuck is ErrRemoteBusy, naming since when, while a fetch or push has been in
// progress longer than slowRemote; nil otherwise. It takes no lock. The time it started,
// not how long it took: the message reaches every waiting GitTarget's conditions, which
// would otherwise change, and be written, at each retry.
func (w *worker) remoteStuck(now time.Time) error {
	since := w.remoteSince.Load()
	if since == 0 {
		return nil
	}
	if started := time.Unix(0, since); now.Sub(started) > slowRemote {
		return fmt.Errorf("%w since %s (branch %s): retried", ErrRemoteBusy, started.UTC().Format(time.TimeOnly+" MST"), w.key.branch)
	}
	return nil
}

// compactIfDue keeps the clone's size bounded (repo.CompactIfDue). A failure is logged and
// the clone checked: compaction reads every object of the tip, also those outside every
// folder, which nothing else reads, so a blob a power loss garbled shows here first, and a
// clone that is damaged is rebuilt (repairIfDamaged) instead of failing to compact, and
// growing, forever. Otherwise the clone stays usable and a later push tries again
// (repo.CompactIfDue waits a while after a failure, which also bounds the checks). It
// reports whether the clone was rebuilt, which the caller fetches before reading it.
// Callers hold w.mu.
func (w *worker) compactIfDue() (repaired bool) {
	done, st, err := w.repo.CompactIfDue(w.key.branch)
	if err != nil {
		w.log.Error(err, "compacting the local clone")
		return w.repairIfDamaged(context.Background(), fmt.Errorf("%w: compacting: %w", errCloneRead, err))
	}
	if done {
		w.log.Info("compacted the local clone to the tip", "objects", st.Kept,
			"looseRemoved", st.LooseRemoved, "packsRemoved", st.PacksRemoved, "took", st.Took.String())
	}
	return false
}

// pushed moves the remote tip to sha, the commit t pushed with files, and brings every
// index along: t's re-indexes those files; another target's, untouched by them, now
// describes sha too. Callers hold w.mu.
func (w *worker) pushed(t *target, sha plumbing.Hash, files map[string][]byte, parsed map[string]parsedFile) error {
	from := w.remoteTip
	w.remoteTip, w.seenBy = sha, t.spec.Key
	for _, u := range w.targets {
		// A target whose first registration could not fetch has no index yet.
		if ix := u.index.Load(); ix != nil && u != t && !touches(files, u.spec.Folder) {
			ix.advance(from, sha)
		}
	}
	ix := t.index.Load()
	for path, content := range files {
		docs, _ := docsOf(parsed, path, content)
		if err := ix.setFile(path, content, docs); err != nil {
			t.inside = layout.Verdict{} // half updated: read in full, even if the folder returns to before
			return err
		}
	}
	ix.advance(from, sha)
	return nil
}

// kustomizeOutside judges the Kustomize files of the repository outside folder at the
// remote tip (layout.KustomizeOutside): those above it and those elsewhere that may reach
// into it with "../". Those inside it are the folder verdict's (layout.Analyze). Callers
// hold w.mu.
func (w *worker) kustomizeOutside(folder string) (layout.Verdict, error) {
	found, err := w.repo.FindFiles(w.kustomizations, w.remoteTip)
	if err != nil {
		return layout.Verdict{}, fmt.Errorf("%w: looking for Kustomize files: %w", errCloneRead, err)
	}
	tree := w.repo.TreeReader(w.remoteTip)
	parsed := make(map[plumbing.Hash]layout.KustomizeRefs, len(found))
	files := make([]layout.KustomizeFile, 0, len(found))
	for _, f := range found {
		refs, ok := w.kustomizeRefs[f.Hash]
		if plan.Within(folder, f.Path) {
			if ok { // another target's, to keep for its next analysis
				parsed[f.Hash] = refs
			}
			continue
		}
		if !ok {
			content, exists, err := tree.ReadFile(f.Path)
			if err != nil {
				return layout.Verdict{}, fmt.Errorf("%w: reading %s: %w", errCloneRead, f.Path, err)
			}
			if !exists {
				continue
			}
			refs = layout.ParseKustomization(content)
		}
		parsed[f.Hash] = refs
		files = append(files, layout.KustomizeFile{Path: f.Path, KustomizeRefs: refs})
	}
	w.kustomizeRefs = parsed
	return layout.KustomizeOutside(folder, files), nil
}

// touches reports whether any of files lies in folder.
func touches(files map[string][]byte, folder string) bool {
	for p := range files {
		if plan.Within(folder, p) {
			return true
		}
	}
	return false
}

// analyze reads the target's folder at the remote tip: verdict, index, object count.
func (w *worker) analyze(t *target) error {
	if w.folderUnchanged(t) {
		return w.reanalyzeOutside(t)
	}
	files, err := w.repo.ReadTree(w.remoteTip, t.spec.Folder)
	if err != nil && !errors.Is(err, repo.ErrPathConflict) {
		return fmt.Errorf("%w: reading folder %s: %w", errCloneRead, t.spec.Folder, err)
	}
	lf := layoutFiles(files, w.reusable(t))
	verdict, ix := layout.Analyze(t.spec.Folder, lf)
	if err != nil { // the folder, or a folder above it, is a file: a person's commit to fix
		verdict, ix = layout.Verdict{Reason: layout.ReasonNotAFolder, Fix: "move that entry away, or create a GitTarget for another path",
			File: t.spec.Folder, Folder: t.spec.Folder}, nil
	}
	t.inside = verdict
	if verdict.Supported {
		outside, err := w.kustomizeOutside(t.spec.Folder)
		if err != nil {
			return err
		}
		if !outside.Supported {
			verdict, ix = outside, nil
		}
	}
	prev := t.index.Load()
	if verdict.Supported && (!t.st.Known || !t.verdict.Supported || prev == nil || !prev.of(t.spec.Folder)) {
		t.folderReady = true // a new folder, or a fixed one, needs its own snapshot
	}
	t.style = folderStyle(lf)
	idx := newFolderIndex(ix, files)
	idx.tip, idx.folder = w.remoteTip, t.spec.Folder
	t.verdict = verdict
	t.index.Store(idx)
	t.st.Known, t.st.Verdict, t.st.ObjectCount = true, verdict, idx.len()
	w.noteLastCommit(t)
	return nil
}

// noteLastCommit shows the remote tip as the target's last commit until it pushes one of
// its own (a branch someone else created, a first registration). Callers hold w.mu.
func (w *worker) noteLastCommit(t *target) {
	if w.remoteTip != plumbing.ZeroHash && t.st.LastCommit == plumbing.ZeroHash {
		if when, err := w.repo.CommitInfo(w.remoteTip); err == nil {
			t.st.LastCommit, t.st.LastCommitTime = w.remoteTip, when
		}
	}
}

// folderUnchanged reports whether t's folder is the same tree at the remote tip as at the
// commit its index describes: a commit elsewhere in the repository (another team's folder,
// a person's README) moved the tip, and re-reading every file of the folder would cost
// its size, not the change's. Any doubt says no: no index of this folder, a folder whose
// own verdict was never reached, one that Kustomize files outside made unsupported (its
// index is empty: the files must be read once that changes), a commit the clone lost.
// Callers hold w.mu.
func (w *worker) folderUnchanged(t *target) bool {
	ix := t.index.Load()
	if ix == nil || !ix.of(t.spec.Folder) || !t.st.Known || t.inside.Reason == "" && !t.inside.Supported ||
		t.inside.Supported != t.verdict.Supported || ix.describes() == w.remoteTip {
		return false
	}
	before, err := w.repo.FolderHash(ix.describes(), t.spec.Folder)
	if err != nil {
		return false
	}
	now, err := w.repo.FolderHash(w.remoteTip, t.spec.Folder)
	return err == nil && now == before
}

// reanalyzeOutside is analyze for a folder whose files did not change (folderUnchanged):
// its own verdict and index stand, and only the Kustomize files outside it are judged
// again. One that now reaches into it leaves the folder unsupported, with an empty index,
// as analyze would. Callers hold w.mu.
func (w *worker) reanalyzeOutside(t *target) error {
	ix := t.index.Load()
	if t.inside.Supported {
		outside, err := w.kustomizeOutside(t.spec.Folder)
		if err != nil {
			return err
		}
		if !outside.Supported {
			empty := newFolderIndex(nil, nil)
			empty.tip, empty.folder = w.remoteTip, t.spec.Folder
			t.index.Store(empty)
			t.verdict = outside
			t.st.Verdict, t.st.ObjectCount = outside, 0
			w.noteLastCommit(t)
			return nil
		}
	}
	ix.advance(ix.describes(), w.remoteTip)
	w.noteLastCommit(t)
	return nil
}

// loop commits windows as they close, until ctx ends.
func (w *worker) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := w.flushDue(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
	}
}

// drain commits every open window at once, when the operator stops, within timeout (0:
// DefaultDrainTimeout, negative: nothing). Abandoned windows would come back after the
// restart only as the snapshot finds them: changes under the committer instead of their
// authors, and deletions not at all under prune mode OnEvent. A target backing off is
// tried once more, since the stop may have cut its last push short; one whose folder
// cannot be written keeps its windows, which the snapshot after the restart recovers.
func (w *worker) drain(timeout time.Duration) {
	if timeout < 0 {
		return
	}
	if timeout == 0 {
		timeout = DefaultDrainTimeout
	}
	// A push this bound cuts short is not looked at again (repo.PushWithin): the pod's grace
	// period has no time for it, and the next process finds whether it landed.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w.mu.Lock()
	w.draining = true
	keys := make([]types.NamespacedName, 0, len(w.targets))
	for k, t := range w.targets {
		w.qmu.Lock()
		for _, win := range t.q.windows {
			win.now = true
			if win.failed { // a declined commit's hold: tried once more, as the target's backoff is
				win.notBefore = time.Time{}
			}
		}
		w.qmu.Unlock()
		t.retryAt = time.Time{}
		keys = append(keys, k)
	}
	w.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		if _, err := w.flushIfDue(ctx, k, 0); err != nil {
			w.log.Error(err, "last commit before stopping failed; the snapshot after the restart recovers the changes", "gitTarget", k.String())
		}
	}
}

// flushDue commits every target whose window closed and returns how long to sleep. A
// target whose commit fails does not hold back the others of the branch: they still
// commit, and only the failing target backs off before retrying.
func (w *worker) flushDue(ctx context.Context) time.Duration {
	var earliest time.Time
	w.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(w.targets))
	for k := range w.targets {
		keys = append(keys, k)
	}
	w.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		if ctx.Err() != nil {
			break // stopping: the drain commits what is due, on a context of its own
		}
		wait, _ := w.flushIfDue(ctx, k, 0) // a failure is logged there, with its backoff
		if due := time.Now().Add(wait); wait > 0 && (earliest.IsZero() || due.Before(earliest)) {
			earliest = due // the targets after it may push for a while
		}
	}
	if earliest.IsZero() {
		return time.Hour
	}
	return untilDue(earliest, time.Now())
}

// untilDue is how long to sleep until due, at least a millisecond: a deadline that passed
// while other windows were committed is taken at once, without a busy loop. Pure.
func untilDue(due, now time.Time) time.Duration {
	return max(due.Sub(now), time.Millisecond)
}

// flushIfDue commits the windows of one target that are due, judged at the time the worker's
// lock is held (ahead of it by ahead, for tests): not when the pass began, nor before a wait
// for the lock, which a fetch or another target's push may hold for seconds. It returns how
// long from its return until something else is due (0: nothing), its own pushes taken off.
func (w *worker) flushIfDue(ctx context.Context, key types.NamespacedName, ahead time.Duration) (time.Duration, error) {
	w.mu.Lock()
	locked := time.Now()
	now := locked.Add(ahead)
	t, ok := w.targets[key]
	if !ok {
		w.mu.Unlock()
		return 0, nil
	}
	if t.st.Known {
		w.lookBack(ctx, t) // before a timeout or a window could use the message again
	}
	if w.heldBack(t, now) {
		w.collapseDeletes(t, now)
	}
	wins, held, timedOut, wait := w.takeDue(t, now)
	if len(held) > 0 {
		w.retrying(held, errors.New(t.st.LastError))
	}
	for _, r := range timedOut {
		w.answers = append(w.answers, answer{r, RequestOutcome{Done: true, Reason: ReasonTimedOut, Message: timedOutMessage(r)}})
	}
	changed, backoff, err := w.flushWindows(ctx, t, wins)
	wait = shorter(wait, backoff) // a request's deadline may come sooner
	w.qmu.Lock()
	t.q.flushing = nil
	w.qmu.Unlock()
	w.report()
	ready := w.takeReady()
	w.mu.Unlock()
	w.reportReady(ready)
	w.reportPending()
	if changed {
		w.opts.OnStatus(key)
	}
	if wait > 0 {
		wait = untilDue(locked.Add(wait), time.Now()) // less what its own commits took
	}
	return wait, err
}

// takeDue takes what is due on t at now, in one hold of qmu: the windows to commit (marked
// flushing, with the journal's mark: what is recorded later is not theirs), the requests
// held while the target backs off (they wait for its retry), those timed out, and how long
// until something else is due. Requests on a target that cannot read its branch, or whose
// folder cannot be written, are told why they wait.
func (w *worker) takeDue(t *target, now time.Time) (wins []*authorWindow, held, timedOut []*CommitRequest, wait time.Duration) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	timedOut, wait = t.q.expired(now, t.st.Known)
	switch {
	case now.Before(t.retryAt):
		wait = shorter(wait, t.retryAt.Sub(now))
		held = t.q.attached()
	case !t.st.Known && t.unread != nil:
		for _, r := range t.q.attached() {
			w.answers = append(w.answers, answer{r, RequestOutcome{Reason: ReasonRetrying, Message: fmt.Sprintf(
				"GitTarget %s could not read its branch yet, and tries again at its next reconcile; the message waits with %s's changes: %v",
				r.Target, r.Author, t.unread)}})
		}
	case t.hidden != nil:
		for _, r := range t.q.attached() {
			w.answers = append(w.answers, answer{r, RequestOutcome{Reason: ReasonRetrying, Message: fmt.Sprintf(
				"GitTarget %s cannot read its branch, and tries again at its next reconcile; the message waits with %s's changes: %v",
				r.Target, r.Author, t.hidden)}})
		}
	case t.st.Known && !t.verdict.Supported:
		for _, win := range t.q.windows {
			w.waitOnFolder(win, t)
		}
	case t.st.Known && t.verdict.Supported:
		var winWait time.Duration
		wins, winWait = t.q.due(t.spec.Window, now)
		wait = shorter(wait, winWait)
		t.q.flushing = wins
		mark := w.journal.mark() // under qmu, as submit records
		for _, win := range wins {
			win.journalMark, win.messageMade, win.joinedLate = mark, false, false
		}
	}
	return wins, held, timedOut, wait
}

// flushWindows commits due windows one after the other. A window the server declines backs
// off on its own (declined) and its error is returned once the others are done; any other
// failure puts that window and those after it back and backs the target off (failWindows).
// It returns whether status changed and the backoff begun (0 for none).
func (w *worker) flushWindows(ctx context.Context, t *target, wins []*authorWindow) (changed bool, backoff time.Duration, err error) {
	var declined error
	declines := 0
	for i, win := range wins {
		// The answers so far (the last window's) go out before the next push, which may take
		// minutes: a pod killed meanwhile would leave a committed request Waiting, and its
		// message would ride the author's next change a second time.
		w.report()
		c, err := w.flush(ctx, t, win)
		switch {
		case errors.Is(err, repo.ErrRejected):
			w.declined(t, win, err)
			declined, changed = err, true
			declines++
			continue
		case err != nil && ctx.Err() != nil:
			// Cut short because the operator stops (or a drain ran out of time): no
			// failure of the target's, and the drain, or the next process, tries again.
			w.qmu.Lock()
			for _, rest := range wins[i:] {
				t.q.retry(rest, time.Now())
			}
			w.qmu.Unlock()
			return changed, 0, err
		case err != nil:
			return true, w.failWindows(ctx, t, wins[i:], err), err
		}
		changed = changed || c
		w.qmu.Lock()
		t.q.flushing = without(t.q.flushing, win) // done with: landed (see landed) or put back
		w.qmu.Unlock()
	}
	if len(wins) > declines {
		t.backoff = 0
	}
	return changed, 0, declined
}

// failWindows puts back a window whose commit failed (rest[0]) and those after it, tells
// every request riding on the target's windows that it is retried, and backs the target
// off. It returns the backoff.
func (w *worker) failWindows(ctx context.Context, t *target, rest []*authorWindow, err error) time.Duration {
	w.repairIfDamaged(ctx, err) // the window is retried after the backoff, on the new clone
	w.qmu.Lock()
	rest[0].failed = true
	for _, win := range rest {
		t.q.retry(win, time.Now())
	}
	// Every request on a window of the target waits for the retry, those that came
	// meanwhile and those of windows not tried included.
	riding := t.q.attached()
	w.qmu.Unlock()
	w.retrying(riding, err)
	t.st.LastError = err.Error()
	t.backoff = min(max(2*t.backoff, time.Second), 2*time.Minute)
	t.retryAt = time.Now().Add(t.backoff)
	w.log.Error(err, "commit failed; retrying", "gitTarget", t.spec.Key.String(), "retryIn", t.backoff.String())
	w.opts.Metrics.failed(w.key)
	return t.backoff
}

// timedOutMessage says why a request's wait for its requester's change ended unused.
func timedOutMessage(r *CommitRequest) string {
	if r.beforeStart {
		return fmt.Sprintf("the operator restarted (or another replica took over) after the request was made, and no change by %s "+
			"reached GitTarget %s since, within spec.timeout, so the message was not used; changes made before the restart that "+
			"the stopping operator did not commit are committed by the target's initial snapshot, under the committer", r.Author, r.Target)
	}
	return fmt.Sprintf("no change by %s reached GitTarget %s within spec.timeout, so the message was not used: "+
		"a change committed before the request was handled is not waited for (create the request before the change, "+
		"or within the target's quiet period after it); otherwise check that a WatchRule routes the object to this target "+
		"and that the admission webhook saw your write (writes it skips or misses are the committer's: see the GitTarget's commits)", r.Author, r.Target)
}

// lookBack answers Committed the requests created before this replica started leading
// that an earlier leader committed (its status not written before it died: a kill right
// after the push), found on the branch by their author, their message as one of the
// commit's paragraphs, a commit time not before their creation (less clockSkew), a change
// to the target's folder, and not every copy of the message claimed by another request
// of the target (Claimed, and the answers of this pass); they leave the queue, so the
// message is not committed a second time; which of the matches is a request's own is
// ownCommit's choice. The requests handed over since the last pass look oldest first.
// The others wait as before. Callers hold w.mu.
func (w *worker) lookBack(ctx context.Context, t *target) {
	w.qmu.Lock()
	requests := t.q.lookingBack()
	w.qmu.Unlock()
	if len(requests) > 0 {
		w.actFor(t.spec) // its fetches use this target's credentials
	}
	slices.SortFunc(requests, func(a, b *CommitRequest) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Key.String(), b.Key.String()))
	})
	for _, r := range requests {
		w.lookFor(ctx, t, r)
	}
}

// lookFor is lookBack for one request r of t: answered Committed when the branch has its
// commit, looked for again when what it found cannot be told for sure (the history or the
// other requests' claims missing), left waiting otherwise. Callers hold w.mu.
func (w *worker) lookFor(ctx context.Context, t *target, r *CommitRequest) {
	claimed, unknown := w.claimedBesides(t, r)
	if unknown != nil && !w.draining && time.Now().Before(r.lookBackUntil) {
		// What the branch shows may be another request's: it looks again on the next pass,
		// and fetches nothing before then.
		w.unsure(t, r, unknown)
		w.qmu.Lock()
		r.lookBack = true
		w.qmu.Unlock()
		return
	}
	found, unseen := w.carriers(ctx, t, r, claimed)
	sha, ok := ownCommit(found, r.Created, waitingBefore(claimed, r.Message))
	if unsure := errors.Join(unseen, unknown); unsure != nil {
		w.unsure(t, r, unsure)
		w.qmu.Lock()
		switch {
		case w.draining && !ok:
			// The stop cannot wait for another look: its author's changes are committed
			// now, under the author, without the message, which may be on the branch
			// already. The request stays open for the next process, which looks again.
			t.q.withdraw(r)
		case !w.draining && time.Now().Before(r.lookBackUntil):
			// Not seen all it should, so what it found may be a newer request's (or one
			// another request claims): looked again on the next pass.
			r.lookBack, ok = true, false
		}
		w.qmu.Unlock()
	}
	if !ok {
		return
	}
	w.qmu.Lock()
	win := t.q.windows[r.Author]
	rode := win != nil && slices.Contains(win.requests, r)
	t.q.withdraw(r)
	if rode && len(win.requests) == 0 && !w.draining {
		win.now, win.askedAt = false, time.Time{} // the request made it urgent; its author's changes keep their quiet time
	}
	w.qmu.Unlock()
	w.answers = append(w.answers, answer{r, RequestOutcome{Done: true, SHA: sha.String(), Reason: ReasonCommitted,
		Message: fmt.Sprintf("committed %s to %s with the requested message", shortSHA(sha.String()), r.Target)}})
}

// unsure logs that lookFor could not tell, for why.
func (w *worker) unsure(t *target, r *CommitRequest, why error) {
	w.log.Info("could not tell whether an earlier leader committed the request: the branch's history "+
		"or the other requests' claims are missing", "gitTarget", t.spec.Key.String(), "request", r.Key.String(), "reason", why.Error())
}

// carriers lists the commits on t's branch that may be r's: by its author, made since its
// creation (less clockSkew), changing t's folder, with a copy of its message that none of
// the requests claimed takes. Others may have pushed on top of r's commit since, and the
// clone holds only the tip: the history is fetched back to before r first, all of whose
// commits are its candidates (the first match alone might be a newer request's); unseen
// is why that fetch failed. Callers hold w.mu.
func (w *worker) carriers(ctx context.Context, t *target, r *CommitRequest, claimed map[types.NamespacedName]Claim) (found []carrier, unseen error) {
	author := authorSignature(r.Author, t.spec.Committer, w.opts.AuthorEmailDomain, time.Time{})
	carries := func(c *object.Commit) bool {
		return c.Author.Name == author.Name && c.Author.Email == author.Email &&
			!c.Committer.When.Before(r.Created.Add(-clockSkew)) &&
			occurrences(c.Message, r.Message) > claimsOn(claimed, c.Hash.String(), r.Message) &&
			changesFolder(c, t.spec.Folder)
	}
	madeBefore := func(c *object.Commit) bool { return c.Committer.When.Before(r.Created.Add(-clockSkew)) }
	unseen = w.remote(ctx, func(ctx context.Context) error {
		return w.repo.DeepenToFind(ctx, t.spec.Branch, w.remoteTip, landedSearch, madeBefore)
	})
	w.repo.FindCommit(w.remoteTip, landedSearch, func(c *object.Commit) bool {
		if carries(c) {
			found = append(found, carrier{c.Hash, c.Committer.When, c.Message})
		}
		return false
	})
	return found, unseen
}

// claimedBesides is what r's Claimed lists, with the answers this worker has not reported
// yet (this pass's) to other requests of r's target t and requester, and the commits
// those still in t's queue tried to push (attempted): one such commit on the branch is
// theirs, though its push reported an error. unknown is why the other requests could not
// be listed: what this worker knows is then all that is known. Callers hold w.mu.
func (w *worker) claimedBesides(t *target, r *CommitRequest) (claimed map[types.NamespacedName]Claim, unknown error) {
	claimed = map[types.NamespacedName]Claim{}
	if r.Claimed != nil {
		listed, err := r.Claimed()
		if err != nil {
			unknown = fmt.Errorf("the claims of the other CommitRequests of %s by %s: %w", r.Target, r.Author, err)
		}
		maps.Copy(claimed, listed)
	}
	w.qmu.Lock()
	for _, o := range t.q.requests() {
		if o.Key != r.Key && len(o.attempted) > 0 && sameRequester(o, r) {
			claimed[o.Key] = Claim{Message: o.Message, Created: o.Created, Attempted: hashStrings(o.attempted)}
		}
	}
	w.qmu.Unlock()
	for _, a := range w.answers {
		if a.req.Key != r.Key && a.out.SHA != "" && sameRequester(a.req, r) {
			claimed[a.req.Key] = Claim{SHA: a.out.SHA, Message: a.req.Message}
		}
	}
	return claimed, unknown
}

// carrier is a commit that carries a copy of a request's message no other request took
// (lookBack), and when it was made.
type carrier struct {
	hash    plumbing.Hash
	when    time.Time
	message string // the commit's
}

// ownCommit picks, among the commits carrying a copy of a request's message no other
// request took, the one made for the request created at created: the first made since,
// as its window committed after it; failing that, the latest made before (within
// clockSkew: the API server's clock may be ahead of the operator's), unless a request
// still waiting, created before that commit (waiting) and whose message it carries, would
// take it as the first made since its own creation. Chosen so, the answers do not depend on the order in which
// requests look, which after a restart is the order their controllers retry; found is in
// the order of a walk from the tip. Times compare to the second. Pure.
func ownCommit(found []carrier, created time.Time, waiting []Claim) (plumbing.Hash, bool) {
	created = created.Truncate(time.Second) // as Git and Kubernetes keep times
	var since, before *carrier
	for i := range found {
		c := &found[i]
		switch {
		case !c.when.Before(created):
			if since == nil || !c.when.After(since.when) { // of one second, the one farther from the tip
				since = c
			}
		case slices.ContainsFunc(waiting, func(w Claim) bool {
			return !c.when.Before(w.Created.Truncate(time.Second)) && occurrences(c.message, w.Message) > 0
		}):
			// the waiting request's, made after it was
		case before == nil || before.when.Before(c.when):
			before = c
		}
	}
	if since == nil {
		since = before
	}
	if since == nil {
		return plumbing.ZeroHash, false
	}
	return since.hash, true
}

// waitingBefore lists the requests claimed names as still waiting (Claim.SHA empty) whose
// message holds message: a commit made since one was created may be its own. Pure.
func waitingBefore(claimed map[types.NamespacedName]Claim, message string) []Claim {
	var out []Claim
	for _, c := range claimed {
		if c.SHA == "" && !c.Created.IsZero() && occurrences(c.Message, message) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// claimsOn counts the copies of message in sha that the requests claimed names take: one
// for each of their messages' paragraphs that is message (a request whose message is
// "release\n\nnotes" takes the copy of "release" its commit carries), whether sha is
// their commit or one their pushes tried. Pure.
func claimsOn(claimed map[types.NamespacedName]Claim, sha, message string) int {
	n := 0
	for _, c := range claimed {
		if c.SHA == sha || slices.Contains(c.Attempted, sha) {
			n += occurrences(c.Message, message)
		}
	}
	return n
}

// hashStrings is shas as strings, as a Claim names commits.
func hashStrings(shas []plumbing.Hash) []string {
	out := make([]string, len(shas))
	for i, sha := range shas {
		out[i] = sha.String()
	}
	return out
}

// occurrences counts the paragraphs of a commit message that are message: a window joins
// its requests' messages by blank lines, so a commit carries one for each request it
// committed for. Co-authors' trailers after the last one are not part of it. Pure.
func occurrences(commitMessage, message string) int {
	paragraph := "\n\n" + strings.TrimSpace(message) + "\n\n"
	most := 0
	for _, m := range withoutCoAuthors(commitMessage) {
		n, rest := 0, "\n\n"+m+"\n\n"
		for i := strings.Index(rest, paragraph); i >= 0; i = strings.Index(rest, paragraph) {
			n++
			rest = rest[i+len(paragraph)-2:] // the blank line after one starts the next
		}
		most = max(most, n)
	}
	return most
}

// changesFolder reports whether c changed folder against its first parent, as a commit of
// a target's window always does: another target on the branch, by the same requester
// with the same message, made the others. False when it cannot be told (the parent beyond
// the clone's shallow history, a tree not readable): the tip of a fresh clone may be
// another target's, and lookBack fetches the history before judging.
func changesFolder(c *object.Commit, folder string) bool {
	folder = strings.Trim(path.Clean("/"+folder), "/")
	mine, ok := folderEntry(c, folder)
	if !ok {
		return false
	}
	if len(c.ParentHashes) == 0 {
		return !mine.IsZero()
	}
	parent, err := c.Parent(0)
	if err != nil {
		return false
	}
	theirs, ok := folderEntry(parent, folder)
	return ok && mine != theirs
}

// folderEntry is the hash folder has in c's tree (the whole tree's for the root), zero
// when c has no such path; ok is false when c's tree cannot be read.
func folderEntry(c *object.Commit, folder string) (_ plumbing.Hash, ok bool) {
	tree, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash, false
	}
	if folder == "" {
		return tree.Hash, true
	}
	e, err := tree.FindEntry(folder)
	switch {
	case errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound):
		return plumbing.ZeroHash, true
	case err != nil:
		return plumbing.ZeroHash, false
	}
	return e.Hash, true
}

// clockSkew is how far ahead of the operator's clock the API server's may be when lookBack
// compares a commit's time with a request's creation.
const clockSkew = time.Minute

// report hands the answers collected so far to the Manager. Callers hold w.mu, so a
// target's removal never overtakes a commit that carried a request's message.
func (w *worker) report() {
	for _, a := range w.answers {
		w.outcome(a.req, a.out)
	}
	w.answers = nil
}

// shorter is the sooner of two waits, where 0 means "nothing to wait for".
func shorter(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// flush writes one author's window of one target in one commit and pushes it, replaying the
// writes on the new remote tip when someone else pushed first. Callers hold w.mu.
func (w *worker) flush(ctx context.Context, t *target, win *authorWindow) (bool, error) {
	w.actFor(t.spec)
	f := &flushing{t: t, win: win, refusedBefore: t.st.Refused}
	for attempt := 1; ; attempt++ {
		if ready, err := w.readyToPlan(ctx, t, win); !ready {
			return false, err
		}
		start := time.Now()
		p, dirty, err := w.planOwn(ctx, t, win)
		if err != nil {
			return false, err
		}
		t.noteRefusals(dirty, p.deferred, p.refused)
		f.found = t.forgetOrphans(p.present) || f.found
		c, err := w.commitPlan(t, win, p, start)
		switch {
		case errors.Is(err, repo.ErrNoChange) && len(p.deferred) > 0:
			return w.deferWindow(f, p), nil // nothing to commit but what waits for its cache
		case errors.Is(err, repo.ErrNoChange):
			moved, err := w.recheck(ctx, f)
			if err != nil {
				return false, err
			}
			if !moved {
				return w.changedNothing(f, dirty, p), nil
			}
			attempt-- // no push was tried: planned again on what Git has now
			continue
		case err != nil:
			return false, err
		}
		oldest := win.oldestOf(dirty, p.deferred) // not of objects still waiting for their cache
		w.opts.Metrics.builtCommit(c.built.Sub(start), c.built.Sub(oldest), win.builtAt.IsZero())
		if win.builtAt.IsZero() {
			win.builtAt = c.built
		}
		retry, err := w.pushCommit(ctx, t, win, c.sha, attempt)
		if err != nil {
			return false, err
		}
		if !retry {
			return w.afterPush(t, win, p, dirty, c, oldest)
		}
	}
}

// flushing is what one flush carries from pass to pass (a replay on a new tip, a plan again
// after a recheck).
type flushing struct {
	t   *target
	win *authorWindow
	// refusedBefore is what status listed as refused when the flush began: a pass planned
	// again compares with the first.
	refusedBefore []string
	// found is whether an orphan was found present on any pass.
	found bool
	// checked is whether recheck asked the remote already: once a flush.
	checked bool
}

// builtCommit is a window's commit made in the clone and not pushed yet, with the times its
// metrics and log line tell.
type builtCommit struct {
	sha plumbing.Hash
	// when is the commit's time, built when it was made, planned how long its plan took.
	when, built time.Time
	planned     time.Duration
	author      string
}

// readyToPlan brings the clone and the target's index to what a plan needs and drops the
// window's requests deleted meanwhile. false, with a nil error, when the folder cannot be
// written: the window is kept until it is fixed.
func (w *worker) readyToPlan(ctx context.Context, t *target, win *authorWindow) (bool, error) {
	if !w.fetched { // the clone was rebuilt (repairIfDamaged) and has not fetched since
		if err := w.refresh(ctx, true, t); err != nil {
			return false, err
		}
	}
	if t.stale(w.remoteTip) {
		// A re-read that failed (of another target's fetch, of an earlier replay, of the
		// registration that moved the target to another folder) or a push whose index
		// update failed left the index behind: a plan from it would miss people's moves
		// and write an object twice, or write to the folder the target left.
		if err := w.analyze(t); err != nil {
			return false, err
		}
	}
	if !t.verdict.Supported {
		w.waitOnFolder(win, t)
		w.qmu.Lock()
		// Kept until the folder is fixed (the cluster holds the state), with the requests
		// that came while it was tried: the next pass tells them too (TargetStalled).
		t.q.retry(win, time.Now())
		w.qmu.Unlock()
		return false, nil
	}
	w.qmu.Lock()
	win.requests = live(win.requests) // a request deleted meanwhile lends no message
	w.qmu.Unlock()
	w.seeAttempts(ctx, t, win)
	return true, nil
}

// commitPlan answers the window's requests whose message already landed and commits the
// plan's files on the remote tip under the window's author. repo.ErrNoChange, with nothing
// done, when the plan writes no file.
func (w *worker) commitPlan(t *target, win *authorWindow, p *writePlan, start time.Time) (builtCommit, error) {
	if len(p.files) == 0 {
		return builtCommit{}, repo.ErrNoChange
	}
	w.qmu.Lock()
	// With those that joined it while it was planned, less one deleted meanwhile; from now on
	// one handed over is not in it (messageMade).
	requests := takeJoined(win)
	win.messageMade = true
	w.qmu.Unlock()
	requests = w.answerLanded(requests)
	w.qmu.Lock()
	win.requests = requests
	w.qmu.Unlock()
	when := time.Now()
	author := authorSignature(win.author, t.spec.Committer, w.opts.AuthorEmailDomain, when)
	committer := object.Signature{Name: t.spec.Committer.Name, Email: t.spec.Committer.Email, When: when}
	msg, fellBack := p.message(t, win)
	if fellBack != nil {
		w.log.Info("the commit message template failed; the default message is used", "gitTarget", t.spec.Key.String(), "reason", fellBack.Error())
		t.st.MessageFallback = "the last commit's message template failed, so it has the default message: " + fellBack.Error()
	} else if len(win.requests) == 0 { // the template was used, and rendered
		t.st.MessageFallback = ""
	}
	msg = withCoAuthors(msg, coAuthorsOf(win, p.actions), t.spec.Committer, w.opts.AuthorEmailDomain, when)
	sha, err := w.repo.Commit(w.remoteTip, p.files, author, committer, msg)
	switch {
	case errors.Is(err, repo.ErrNoChange):
		return builtCommit{}, err
	case errors.Is(err, repo.ErrInvalidPath) || errors.Is(err, repo.ErrPathConflict) || errors.Is(err, repo.ErrInvalidSignature):
		return builtCommit{}, fmt.Errorf("committing: %w", err) // the plan's fault, not the clone's: nothing to verify
	case err != nil:
		return builtCommit{}, fmt.Errorf("committing: %w: %w", errCloneRead, err)
	}
	return builtCommit{sha: sha, when: when, built: time.Now(), planned: when.Sub(start), author: author.Name}, nil
}

// recheck asks the remote, once a flush, whether a window that changes nothing judged a tip
// that is gone (tipMoved): a list's window, or one whose earlier commit, or the target's
// since the last fetch, may have landed though its push reported an error (inDoubt,
// doubted), which the remote's tip then carries.
func (w *worker) recheck(ctx context.Context, f *flushing) (bool, error) {
	if !(f.win.compared || inDoubt(f.win) || w.doubted(f.t)) || f.checked {
		return false, nil
	}
	f.checked = true
	return w.tipMoved(ctx, f.t)
}

// deferWindow keeps a window whose only changes wait for their cache (deferAll) and reports
// whether status changed.
func (w *worker) deferWindow(f *flushing, p *writePlan) bool {
	w.deferAll(f.t, f.win, p.deferredErr)
	return f.found || !slices.Equal(f.refusedBefore, f.t.st.Refused)
}

// changedNothing settles a window Git already matches: its requests are answered without a
// commit and its changes count as delivered. It reports whether status changed.
func (w *worker) changedNothing(f *flushing, dirty map[ObjectKey]intent, p *writePlan) bool {
	w.qmu.Lock()
	takeJoined(f.win) // answered as the window's own: its author's changes needed no commit
	w.qmu.Unlock()
	w.foundDelivered(f.win)
	w.answer(f.win, dirty, "", p.refusals(), 0)
	w.landed(f.t, f.win)
	w.delivered(f.t, f.win)
	return w.settled(f.t, f.refusedBefore) || f.found
}

// pushCommit pushes a window's commit. retry is true when the remote moved, or may have,
// and the clone fetched its new tip: the window is then planned again on it.
func (w *worker) pushCommit(ctx context.Context, t *target, win *authorWindow, sha plumbing.Hash, attempt int) (retry bool, _ error) {
	err := w.push(ctx, sha)
	if err == nil {
		return false, nil
	}
	maybe := errors.Is(err, repo.ErrMaybeMoved) // declined, perhaps as a lost race: found out by trying again
	if (maybe || errors.Is(err, repo.ErrRemoteMoved)) && attempt < maxPushAttempts {
		// Usually a lost race; but a push whose answer was lost, found under someone's
		// commit by the check that followed, lands the same way: the replay answers it.
		if !errors.Is(err, repo.ErrNotSent) { // one refused before sending never landed
			t.mayHaveLanded(win, sha)
		}
		if maybe {
			w.opts.Metrics.push(w.key, "failed")
			w.log.Info("the remote declined the push and could not be looked at again; fetching to tell a lost race from a decline", "gitTarget", t.spec.Key.String(), "attempt", attempt)
		} else {
			w.opts.Metrics.push(w.key, "conflict")
			w.log.Info("remote moved; replaying writes on the new tip", "gitTarget", t.spec.Key.String(), "attempt", attempt)
		}
		expected := w.remoteTip
		if err := w.refresh(ctx, false, t); err != nil {
			return false, err
		}
		if maybe && w.remoteTip == expected {
			// The branch had not moved: the server declined this commit itself.
			return false, fmt.Errorf("pushing: %w", repo.Declined(err))
		}
		return true, nil
	}
	w.opts.Metrics.push(w.key, "failed")
	// One that failed before offering the update, or that the server declined, never landed.
	if !errors.Is(err, repo.ErrNotSent) && !errors.Is(err, repo.ErrRejected) {
		t.mayHaveLanded(win, sha)
	}
	// No SHA in the error: it is new on every attempt, and the error reaches status.
	return false, fmt.Errorf("pushing: %w", err)
}

// afterPush takes a pushed commit in: metrics, the target's index and status, the answers
// to the window's requests, and its changes delivered.
func (w *worker) afterPush(t *target, win *authorWindow, p *writePlan, dirty map[ObjectKey]intent, c builtCommit, oldest time.Time) (bool, error) {
	w.opts.Metrics.push(w.key, "pushed")
	pushedAt := time.Now()
	w.opts.Metrics.delivered(pushedAt.Sub(oldest).Seconds(), pushedAt.Sub(win.builtAt).Seconds()) // through every retry
	if err := w.pushed(t, c.sha, p.files, p.parsed); err != nil {
		attemptedFor(win.requests, c.sha) // delivered, and timed: a retry that finds it there reports it
		t.doubtAt = time.Now()            // its index may lack what it wrote (doubted)
		return false, err
	}
	t.st.LastCommit, t.st.LastCommitTime = c.sha, c.when
	t.st.ObjectCount = t.index.Load().len()
	w.clearFailure(t)
	w.log.Info("pushed", "gitTarget", t.spec.Key.String(), "sha", c.sha.String(), "files", len(p.files), "author", c.author,
		"plan", c.planned.String(), "build", c.built.Sub(c.when).String(), "push", pushedAt.Sub(c.built).String())
	w.answer(win, dirty, c.sha.String(), p.refusals(), len(p.deferred))
	w.landed(t, win) // before the deferred objects go back, maybe into a window a list opened
	w.keepDeferred(t, win, p.deferred)
	w.delivered(t, win)
	w.compactIfDue() // a clone rebuilt here is fetched by the next flush (!w.fetched)
	return true, nil
}

// tipMoved fetches the branch for a window that compared a list with Git and found nothing
// to change, and reports whether the remote moved since the last fetch: the comparison
// then judged a tip that is gone (a file a person removed since would stay removed until
// the next list). Callers hold w.mu.
func (w *worker) tipMoved(ctx context.Context, t *target) (bool, error) {
	before := w.remoteTip
	if err := w.refresh(ctx, false, t); err != nil {
		return false, err
	}
	return w.remoteTip != before, nil
}

// landed ends the commit of win, now in Git (queue.delivered): what a list found of its
// objects while it was pushed is the committer's. Callers hold w.mu.
func (w *worker) landed(t *target, win *authorWindow) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	t.q.delivered(win, time.Now())
}

// delivered drops from the journal the deletions of a window now in Git (written, found
// written, or refused, which status reports), unless a newer change of the same object
// waits again. Callers hold w.mu.
func (w *worker) delivered(t *target, win *authorWindow) {
	if w.journal == nil {
		return
	}
	keys := make([]ObjectKey, 0, len(win.dirty))
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for k := range win.dirty {
		if _, waits := t.q.owner[k]; !waits {
			keys = append(keys, k)
		}
	}
	w.journal.writtenUpTo(t.spec.Key, keys, win.journalMark)
}

// settled ends a window that needed no commit: Git already has what it waits for, so an
// earlier failure to write it is over (a push that landed though its answer was lost, an
// update of the index that failed after the push). It reports whether the status changed.
func (w *worker) settled(t *target, refusedBefore []string) bool {
	return w.clearFailure(t) || !slices.Equal(refusedBefore, t.st.Refused)
}

// clearFailure ends the target's write failure once a window committed (or needed no
// commit), unless another window whose commit failed still waits for its retry: a status
// that flips to Ready between two failures of one window would mislead. It reports whether
// the status changed. Callers hold w.mu.
func (w *worker) clearFailure(t *target) bool {
	w.qmu.Lock()
	failing := t.q.failing()
	w.qmu.Unlock()
	if failing || t.st.LastError == "" {
		return false
	}
	t.st.LastError = ""
	return true
}

// waitOnFolder tells the CommitRequests of a window why their message waits: the target's
// folder cannot be written (Stalled). Their author's changes are pending, so spec.timeout
// no longer applies; the commit that carries the message, once the folder is fixed,
// replaces this outcome. Callers hold w.mu.
func (w *worker) waitOnFolder(win *authorWindow, t *target) {
	for _, r := range win.requests {
		w.answers = append(w.answers, answer{r, RequestOutcome{Reason: ReasonTargetStalled,
			Message: fmt.Sprintf("the message waits with %s's changes until GitTarget %s's folder can be written: %s", r.Author, r.Target, t.verdict.Message())}})
	}
}

// declined puts back a window whose commit the server declined (repo.ErrRejected): perhaps
// for what this commit holds or who wrote it (a pre-receive hook, push protection), so the
// window backs off on its own (queue.decline) while the target's other windows commit.
// Before, it went first at every retry, being the oldest, and held back every other
// author's changes of the target for as long as the server declined it. The failure stands
// in status until the window commits; its requests say why they wait. Callers hold w.mu.
func (w *worker) declined(t *target, win *authorWindow, err error) {
	w.qmu.Lock()
	t.q.decline(win, time.Now())
	var riding []*CommitRequest
	if cur := t.q.windows[win.author]; cur != nil {
		riding = slices.Clone(cur.requests) // withdraw compacts the list in place under qmu
	}
	w.qmu.Unlock()
	w.retrying(riding, err)
	t.st.LastError = err.Error()
	w.log.Error(err, "the remote declined a commit; retrying it with backoff, the target's other windows go on",
		"gitTarget", t.spec.Key.String(), "author", win.author)
	w.opts.Metrics.failed(w.key)
	w.poke() // the pass computed its sleep without this window
}

// deferAll puts back a window with nothing to commit but objects waiting for their cache:
// held back on its own (queue.deferWindow), its requests told why, the target's other
// windows and status untouched. Callers hold w.mu.
func (w *worker) deferAll(t *target, win *authorWindow, why error) {
	w.qmu.Lock()
	requests := takeJoined(win) // those that joined it are told too
	w.qmu.Unlock()
	for _, r := range requests {
		w.answers = append(w.answers, answer{r, RequestOutcome{Reason: ReasonRetrying,
			Message: fmt.Sprintf("the commit carrying the message waits for the cluster state it needs: %v "+
				"(if this lasts, see the WatchRule's conditions: its resource may fail to list)", why)}})
	}
	w.qmu.Lock()
	t.q.deferWindow(win, time.Now())
	w.qmu.Unlock()
	w.poke()
}

// keepDeferred puts the objects a plan deferred (their cache not complete) back into their
// author's window, keeping its age, so they commit once the cache is; the rest of the
// window committed without them. Callers hold w.mu.
func (w *worker) keepDeferred(t *target, win *authorWindow, deferred map[ObjectKey]intent) {
	if len(deferred) == 0 {
		return
	}
	// Each keeps its own age, and none was built into a commit yet: the author's later
	// changes, which join them, are timed from their own arrival and first build.
	since := make(map[ObjectKey]time.Time, len(deferred))
	for k := range deferred {
		since[k] = win.sinceOf(k)
	}
	w.qmu.Lock()
	// retry: a request that came while the window was committed rides the deferred objects,
	// the author's changes pending again.
	t.q.retry(&authorWindow{author: win.author, dirty: deferred, Window: Window{First: win.oldestOf(deferred, nil)},
		since: since, coAuthors: win.coAuthors, listed: win.listed}, time.Now())
	w.qmu.Unlock()
	w.poke() // the pass that flushed win computed its sleep without this window
}

// planOwn plans the window's objects but those another author changed since it was
// detached: an object's state is read at commit time, so it carries their change, which
// their window commits under their name. The plan is made again (up to replans times) when
// one was changed while it was planned: the informer's cache holds a write just before its
// event reaches the writer. After the last look, the plan is made once more without what
// that look saw move, unlooked; one whose event comes after the last look still goes with
// this commit. dirty is what the plan covers.
func (w *worker) planOwn(ctx context.Context, t *target, win *authorWindow) (p *writePlan, dirty map[ObjectKey]intent, err error) {
	dirty = w.ownDirty(t, win, win.dirty)
	for i := 0; ; i++ {
		if p, err = w.plan(ctx, t, dirty); err != nil {
			return nil, nil, err
		}
		if i > replans {
			break // planned without what the last look saw move
		}
		left := w.ownDirty(t, win, dirty)
		if len(left) == len(dirty) {
			break
		}
		dirty = left
	}
	w.leftOut(t, win, dirty)
	return p, dirty, nil // the plan and what it covers
}

// replans bounds how often planOwn looks again after a plan (and so plans at most replans+2
// times): each plan reads every object of the window while the worker's lock is held.
const replans = 2

// ownDirty is dirty without the objects now waiting in another author's window.
func (w *worker) ownDirty(t *target, win *authorWindow, dirty map[ObjectKey]intent) map[ObjectKey]intent {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	out, copied := dirty, false
	for k := range dirty {
		if owner, ok := t.q.owner[k]; ok && owner != win.author {
			if !copied {
				out, copied = maps.Clone(dirty), true
			}
			delete(out, k)
		}
	}
	return out
}

// leftOut gives the objects of win its plan left to other authors (those not in planned)
// the age they had in win, for maxDelay, and its credits (queue.tookFrom), as if they had
// moved before it closed.
func (w *worker) leftOut(t *target, win *authorWindow, planned map[ObjectKey]intent) {
	if len(planned) == len(win.dirty) {
		return
	}
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for k := range win.dirty {
		if _, ok := planned[k]; !ok {
			t.q.keepAge(k, win)
			t.q.tookFrom(k, win)
		}
	}
}

// retrying tells the CommitRequests waiting for a retry after a failed commit why their message
// is not committed yet; the outcome stays open, and the commit that carries the message
// replaces it. Callers hold w.mu.
func (w *worker) retrying(requests []*CommitRequest, err error) {
	for _, r := range requests {
		w.answers = append(w.answers, answer{r, RequestOutcome{Reason: ReasonRetrying,
			Message: fmt.Sprintf("a commit of the target failed and is retried, the message with it: %v", err)}})
	}
}

// attempted records that sha, a commit carrying the window's messages, may have reached
// the remote although its push or what followed reported an error. Only the last
// keptAttempts are kept: a push that landed leaves nothing to commit, so the very next
// plan answers the request (Landed), and an hour's outage must not grow the list by one
// per retry.
func attempted(win *authorWindow, sha plumbing.Hash) {
	attemptedFor(win.requests, sha)
	win.tried = lastKept(append(win.tried, sha))
}

// attemptedFor is attempted for the requests alone: sha was pushed (and its delivery timed),
// but what followed failed.
func attemptedFor(requests []*CommitRequest, sha plumbing.Hash) {
	for _, r := range requests {
		r.attempted = lastKept(append(r.attempted, sha))
	}
}

// collapseEvery is how often a target whose commits fail looks for changes of gone objects
// it need not keep (collapseDeletes), and a suspended target's kept changes are looked at
// (collapseParked).
const collapseEvery = 30 * time.Second

// collapseDeletes forgets, while the target's commits fail (an outage), the changes that
// would change nothing in Git: of an object the cluster no longer has, whose delete is not
// mirrored (a rule without DELETE), or whose document Git lacks at the tip last read
// (created and deleted while Git was away, a Pod or Job of a generated name), or under
// prune mode Never. Every other change waits as an object key, which the cluster's objects
// bound; those, which no list brings back, would grow with every name created and deleted
// until Git returned. Nothing is forgotten while a push of the target's may have landed
// unseen (doubted), nor from a window in doubt (inDoubt) until its retry, nor an object
// changed again while this looked (its creation again). Callers hold w.mu.
func (w *worker) collapseDeletes(t *target, now time.Time) {
	if !t.st.Known || now.Sub(t.collapsedAt) < collapseEvery || t.stale(w.remoteTip) || w.doubted(t) {
		return
	}
	t.collapsedAt = now
	ix := t.index.Load()
	w.qmu.Lock()
	waiting := t.q.goneCandidates(t.spec.Prune)
	mark := w.journal.mark() // under qmu, as submit records: a line since is another change's
	w.qmu.Unlock()
	for k, c := range waiting { // without qmu: the Resolver's locks are the watcher's
		if _, inGit := ix.lookup(k.Identity()); c.removes && inGit && t.spec.Prune != PruneNever {
			delete(waiting, k)
		} else if held(w.opts.Resolver, t.spec.Key, k) {
			delete(waiting, k)
		} else if obj, err := w.opts.Resolver.Current(t.spec.Key, k); err != nil || obj != nil {
			delete(waiting, k) // there again, or its cache cannot tell: the plan decides
		}
	}
	if len(waiting) == 0 {
		return
	}
	w.qmu.Lock()
	dropped := t.q.dropGone(waiting, t.spec.Prune)
	w.journal.writtenUpTo(t.spec.Key, journaledOf(dropped, waiting), mark)
	w.qmu.Unlock()
	if len(dropped) > 0 {
		w.log.Info("forgot changes of gone objects that change nothing in Git while commits fail", "gitTarget", t.spec.Key.String(), "objects", len(dropped))
		w.reportPending()
	}
}

// heldBack says whether t's commits fail: it backs off after a failed commit, or the
// server declined a commit (a protected branch: its window holds back on its own backoff,
// the target's is not set). Then a change of a gone object that changes nothing in Git is
// forgotten (collapseDeletes), or a decline that lasts would keep every such key, and its
// journal line, for as long. (A folder that cannot be written, whose changes wait for the
// fix, is not counted: whether its index knows every document it holds is not looked at
// here.) Callers hold w.mu.
func (w *worker) heldBack(t *target, now time.Time) bool {
	if now.Before(t.retryAt) {
		return true
	}
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return t.q.declinedAny()
}

// mayHaveLanded records that sha, a commit of win, may be on the remote though its push
// reported an error: for win (attempted) and for the whole target until the next fetch
// (doubted). Callers hold w.mu.
func (t *target) mayHaveLanded(win *authorWindow, sha plumbing.Hash) {
	attempted(win, sha)
	t.doubtAt = time.Now()
}

// doubted says whether a commit of t may be on the remote though its push reported an
// error, and no fetch since has shown the branch: a window holding an object that commit
// wrote (moved there from the window that pushed it) would plan on a tip without it.
// Callers hold w.mu.
func (w *worker) doubted(t *target) bool {
	return !t.doubtAt.IsZero() && !w.lastFetch.After(t.doubtAt)
}

// inDoubt says a commit of win, or of a request riding it, may be on the remote though its
// push reported an error (attempted). Until a fetch shows where the branch is, a plan that
// finds nothing to commit may have judged the tip that push left behind: the request would
// be told its message was not used, and an object changed back since would keep in Git
// what that commit wrote.
func inDoubt(win *authorWindow) bool {
	if len(win.tried) > 0 {
		return true
	}
	return slices.ContainsFunc(win.requests, func(r *CommitRequest) bool { return len(r.attempted) > 0 })
}

// lastKept is the last keptAttempts of shas.
func lastKept(shas []plumbing.Hash) []plumbing.Hash {
	if extra := len(shas) - keptAttempts; extra > 0 {
		return slices.Delete(shas, 0, extra)
	}
	return shas
}

// seeAttempts brings into the clone's history the commits of win whose pushes reported an
// error (its own and its requests'), when they may have landed under commits others
// pushed since: Landed then finds them. A failure leaves the look as it was (those
// requests are then told their pushes' commits), and is logged. Callers hold w.mu.
func (w *worker) seeAttempts(ctx context.Context, t *target, win *authorWindow) {
	candidates := slices.Clone(win.tried)
	for _, r := range win.requests {
		candidates = append(candidates, r.attempted...)
	}
	if len(candidates) == 0 {
		return
	}
	err := w.remote(ctx, func(ctx context.Context) error {
		return w.repo.DeepenToLanded(ctx, t.spec.Branch, w.remoteTip, candidates, landedSearch)
	})
	if err != nil {
		w.log.Info("could not fetch the branch's history to look for commits whose pushes reported errors",
			"gitTarget", t.spec.Key.String(), "reason", err.Error())
	}
}

// foundDelivered records the delivery of a window with nothing left to commit when an
// earlier commit of it, whose push reported an error, is on the remote (its answer was
// lost, and so was the look that followed): the slowest windows, those an outage delayed,
// would otherwise be missing from the latency histograms the "delivery is slow" alert
// reads. git_pushes_total keeps that attempt as counted, each attempt once. Callers hold
// w.mu.
func (w *worker) foundDelivered(win *authorWindow) {
	if len(win.tried) == 0 || win.builtAt.IsZero() {
		return
	}
	if _, ok := w.repo.Landed(w.remoteTip, win.tried, landedSearch); ok {
		now := time.Now()
		w.opts.Metrics.delivered(now.Sub(win.First).Seconds(), now.Sub(win.builtAt).Seconds())
	}
	win.tried = nil
}

// keptAttempts is how many of a request's failed pushes attempted remembers.
const keptAttempts = 16

// noteRefusals records what a plan of the dirty objects refused, and forgets the refusals
// of those it wrote, skipped or removed (not of those it deferred: they were not planned):
// a refusal stays in status until the object is planned again, whatever other windows
// commit meanwhile. Callers hold w.mu.
func (t *target) noteRefusals(dirty, deferred map[ObjectKey]intent, refused map[ObjectKey]string) {
	for k := range dirty {
		if _, waits := deferred[k]; waits {
			continue
		}
		if reason, ok := refused[k]; ok {
			if t.refused == nil {
				t.refused = map[ObjectKey]string{}
			}
			t.refused[k] = reason
		} else {
			delete(t.refused, k)
		}
	}
	t.listRefusals()
}

// forgetOrphans stops counting as orphans the objects a plan found in the cluster: one
// created again after a list found it gone, or created between the list and its snapshot,
// counted in status.orphans until the next list of its resource, which may be days away.
// It reports whether the count status shows changed. Callers hold w.mu.
func (t *target) forgetOrphans(present map[manifest.Identity]bool) bool {
	before := -1
	for id := range present {
		for _, ids := range t.orphans { // of any version of its resource
			if ids[id] {
				if before < 0 {
					before = t.orphanCount(everyResource) // counted only when one is forgotten
				}
				delete(ids, id)
			}
		}
	}
	return before >= 0 && before != t.orphanCount(everyResource)
}

// listRefusals sets st.Refused from refused, sorted. Callers hold w.mu.
func (t *target) listRefusals() {
	out := make([]string, 0, len(t.refused))
	for _, r := range t.refused {
		out = append(out, r)
	}
	sort.Strings(out)
	t.st.Refused = out
}

// landedBeforeStop is the outcome of request r of a target that stopped writing before its
// commit was confirmed, removed being the default: Committed when a push that reported an
// error carried its message to the remote as w last saw it, else removed naming the commits
// that may have. A target deleted in its backoff would otherwise report TargetRemoved for a
// message that is in Git. w is nil when the target had no worker; callers hold no lock.
func landedBeforeStop(w *worker, r *CommitRequest, removed RequestOutcome) RequestOutcome {
	if w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	if len(r.attempted) == 0 {
		return removed
	}
	if w != nil {
		if landed, ok := w.repo.Landed(w.remoteTip, r.attempted, landedSearch); ok {
			return RequestOutcome{Done: true, SHA: landed.String(), Reason: ReasonCommitted,
				Message: fmt.Sprintf("committed %s to %s with the requested message", shortSHA(landed.String()), r.Target)}
		}
	}
	tried := make([]string, 0, len(r.attempted))
	for _, sha := range r.attempted {
		tried = append(tried, shortSHA(sha.String()))
	}
	removed.Message += fmt.Sprintf("; pushes of the message reported errors (commits %s): "+
		"if the remote took one after all, the branch has it", strings.Join(tried, ", "))
	return removed
}

// answerLanded answers the requests an earlier commit of the window carried to the remote
// although its push reported an error (Landed: the tip is that commit or built on it), and
// returns the others: a retry that has new changes to commit (the author's, joined since)
// must not carry those messages a second time. Callers hold w.mu.
func (w *worker) answerLanded(requests []*CommitRequest) []*CommitRequest {
	var rest []*CommitRequest
	for _, r := range requests {
		if len(r.attempted) > 0 {
			if landed, ok := w.repo.Landed(w.remoteTip, r.attempted, landedSearch); ok {
				w.answers = append(w.answers, answer{r, RequestOutcome{Done: true, SHA: landed.String(), Reason: ReasonCommitted,
					Message: fmt.Sprintf("committed %s to %s with the requested message", shortSHA(landed.String()), r.Target)}})
				continue
			}
		}
		rest = append(rest, r)
	}
	return rest
}

// answer queues the outcome of the window's CommitRequests: the pushed commit, or that
// their author's changes needed none (or could not be written: refused, or were all left to
// the authors who changed them since: dirty, what the plan covered, is empty). A commit
// that lacks some of the changes, refused or deferred (how many wait for their cache),
// says so: the request's status alone must not read as the whole change committed.
// Callers hold w.mu.
func (w *worker) answer(win *authorWindow, dirty map[ObjectKey]intent, sha string, refused []string, deferred int) {
	for _, r := range win.requests {
		out := RequestOutcome{Done: true, SHA: sha, Reason: ReasonCommitted,
			Message: fmt.Sprintf("committed %s to %s with the requested message", shortSHA(sha), r.Target)}
		landed, ok := plumbing.ZeroHash, false
		if sha == "" {
			landed, ok = w.repo.Landed(w.remoteTip, r.attempted, landedSearch)
		}
		switch {
		case ok:
			// A push that reported an error had landed: the remote's tip is that commit, or
			// was built on it since.
			out.SHA = landed.String()
			out.Message = fmt.Sprintf("committed %s to %s with the requested message", shortSHA(out.SHA), r.Target)
			out.Message += lacking(refused)
		case sha != "":
			out.Message += lacking(refused) + waitingForCache(deferred)
		case len(refused) > 0:
			out = RequestOutcome{Done: true, Reason: ReasonNothingToCommit,
				Message: fmt.Sprintf("no commit was made and the message was not used: the writer refused %d of the changes (%s); "+
					"fix that, then create a new CommitRequest with the next change", len(refused), refused[0])}
		case sha == "" && len(dirty) == 0 && !win.forgot:
			out = RequestOutcome{Done: true, Reason: ReasonNothingToCommit,
				Message: fmt.Sprintf("no change of %s was left to commit with the message: someone changed the same objects after %s "+
					"and their commit carries them (an object's last writer does), so the message was not used; "+
					"create a new CommitRequest with your next change", r.Author, r.Author)}
		case sha == "":
			out = RequestOutcome{Done: true, Reason: ReasonNothingToCommit,
				Message: fmt.Sprintf("the pending changes of %s left GitTarget %s's folder as it was, so no commit was made and the message was not used", r.Author, r.Target)}
		}
		w.answers = append(w.answers, answer{r, out})
	}
}

// lacking is what a CommitRequest's message adds when its commit lacks refused changes.
func lacking(refused []string) string {
	if len(refused) == 0 {
		return ""
	}
	return fmt.Sprintf("; it lacks %d of the changes, which the writer refused (%s): see the GitTarget's status", len(refused), refused[0])
}

// waitingForCache says how many of a committed window's changes were left out of its commit
// because the cluster's cache of their resource was not complete (ErrNotSynced): they are
// committed once it is, by their own commit, which a later request of the author rides.
func waitingForCache(deferred int) string {
	if deferred == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of the changes are not in it: the operator's cache of their resource was not complete yet, "+
		"and they are committed once it is, without this message", deferred)
}

// landedSearch bounds how many commits back from the remote's tip a retried request looks
// for a commit of its message that landed though its push reported an error.
const landedSearch = 100

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func (t *target) folder() string {
	if p := t.folderPath.Load(); p != nil {
		return *p
	}
	return ""
}

// folderStyle is the style of the first file in the folder that shows one.
func folderStyle(files []layout.File) manifest.Style {
	for _, f := range files {
		if st, ok := manifest.DetectStyle(f.Content); ok {
			return st
		}
	}
	return manifest.Style{}
}
