package batch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// TargetSpec is what the writer needs to know about one GitTarget, resolved by its controller.
type TargetSpec struct {
	Key  types.NamespacedName
	URL  string
	Auth transport.AuthMethod
	// AuthVersion names what Auth was built from (see controller.ProviderAuth): a new
	// version retries a failing target at once, the same one keeps its backoff. Empty
	// compares Auth by value, which only works for credentials without functions (not SSH).
	AuthVersion string
	Branch      string
	Folder      string
	Window      WindowConfig
	Committer   Identity
	// Messages are the parsed commit message templates.
	Messages Messages
	// Prune is the prune mode: PruneOnEvent (default), PruneAlways or PruneNever.
	Prune string
	// Sensitive lists resources this target treats as sensitive besides Options.Sensitive.
	Sensitive []schema.GroupResource
	// Encryption is nil when the target cannot encrypt; sensitive objects are then refused.
	Encryption *Encryption
	// Created is when the GitTarget was created: of two targets whose folders overlap on one
	// repository and branch, the older writes (ErrFolderOverlap).
	Created time.Time
}

// ErrFolderOverlap is EnsureTarget's answer for a target whose folder is, contains or lies
// inside the folder of an older target registered on the same repository and branch: two
// targets would write, and prune, the same files. Admission refuses such a target; this
// covers those it could not see (created within its cache's lag, or with it off).
var ErrFolderOverlap = errors.New("folder overlaps another GitTarget's")

// place is where a registered target writes, for overlapPlan.
type place struct {
	wk      workerKey
	folder  string
	created time.Time
}

// overlapPlan judges a target about to register against the registered ones: the older
// target of an overlapping pair keeps its folder (ties: the smaller name). It returns the
// error refusing key and the target that keeps the folder, or the newer targets key
// displaces. Pure.
func overlapPlan(key types.NamespacedName, me place, places map[types.NamespacedName]place) (holder types.NamespacedName, refuse error, displace []types.NamespacedName) {
	others := slices.SortedFunc(maps.Keys(places), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, other := range others {
		p := places[other]
		if other == key || p.wk != me.wk || !foldersOverlap(me.folder, p.folder) {
			continue
		}
		if p.created.Before(me.created) || (p.created.Equal(me.created) && other.String() < key.String()) {
			return other, FolderOverlapError(key, me.folder, other, p.folder), nil
		}
		displace = append(displace, other)
	}
	return types.NamespacedName{}, nil, displace
}

// displace stops the newer targets whose folders overlap spec's, now registered, and tells
// their controllers, which find them refused (ErrFolderOverlap). Their pending changes are
// kept for their return (SuspendTarget). Each is judged again as it is stopped: the list
// was made when spec's registration began, and one may have been removed or moved to
// another repository or branch since (a registration there does not wait for this one's).
// Those a displaced target kept out are told too: it holds no folder now.
func (m *Manager) displace(newer []types.NamespacedName, spec TargetSpec) {
	me := place{wk: workerKeyOf(spec), folder: spec.Folder}
	overlaps := func(p place, ok bool) bool { return ok && p.wk == me.wk && foldersOverlap(p.folder, me.folder) }
	for _, k := range newer {
		why := fmt.Sprintf("its folder overlaps the folder %q of GitTarget %s, created earlier", spec.Folder, spec.Key)
		if m.stopTargetIf(k, true, suspendedMessage(k, why), overlaps) {
			m.opts.OnStatus(k)
			m.letGo(k)
		}
	}
}

// letGo tells the targets key kept out of its folder (shutOut) that it let it go, so
// their controllers try again now; one still overlapping is refused again.
func (m *Manager) letGo(key types.NamespacedName) {
	m.mu.Lock()
	out := m.shutOut[key]
	delete(m.shutOut, key)
	m.mu.Unlock()
	for _, k := range out {
		m.opts.OnStatus(k)
	}
}

// FolderOverlapError is ErrFolderOverlap for target, refused because the older holder keeps
// an overlapping folder; the writer and the GitTarget controller say it alike.
func FolderOverlapError(target types.NamespacedName, folder string, holder types.NamespacedName, holderFolder string) error {
	return fmt.Errorf("%w: folder %q of GitTarget %s overlaps folder %q of GitTarget %s, created earlier, on the same "+
		"repository and branch: give one of them a folder neither equal to, inside nor around the other's",
		ErrFolderOverlap, folder, target, holderFolder, holder)
}

// foldersOverlap reports whether two folders are equal or one lies inside the other.
func foldersOverlap(a, b string) bool {
	fa, fb := strings.Trim(path.Clean("/"+a), "/")+"/", strings.Trim(path.Clean("/"+b), "/")+"/"
	if fa == "/" || fb == "/" {
		return true // the repository's root holds every folder
	}
	return strings.HasPrefix(fa, fb) || strings.HasPrefix(fb, fa)
}

// Identity is a Git author or committer.
type Identity struct {
	Name  string
	Email string
}

// TargetStatus is the writer's view of a target, copied into GitTarget status.
type TargetStatus struct {
	// Known is false until the folder was read once.
	Known          bool
	Verdict        layout.Verdict
	LastCommit     plumbing.Hash
	LastCommitTime time.Time
	// BranchEmpty says the branch has no commit yet (LastCommit is zero for that reason, not
	// because its commit could not be read).
	BranchEmpty bool
	ObjectCount int
	// LastError is the latest failure to write or push, empty after a success.
	LastError string
	// Refused names objects the writer will not write and why (e.g. plaintext Secrets).
	Refused []string
	// Orphans counts documents whose objects the last complete list did not find.
	Orphans int
	// MessageFallback says why the target's commit message template failed at its last
	// commit made from it (the default message was used instead), empty once one rendered:
	// a template admission let through can still fail on a window no sample was like.
	MessageFallback string
}

// Options configure the Manager.
type Options struct {
	// WorkDir holds one persistent bare clone per (repository, branch).
	WorkDir  string
	Resolver Resolver
	Log      logr.Logger
	// OnStatus is called when a target's status changed, without the writer's locks held but
	// possibly under the watcher's (Watched): it must not block nor call back into the
	// writer or the watcher (main's hands a notice to a buffered channel, or drops it).
	OnStatus func(types.NamespacedName)
	// Sensitive says which resources must never be written in plaintext; the writer refuses
	// them until encryption exists. Default: CoreSecretsOnly.
	Sensitive func(schema.GroupResource) bool
	// Metrics records the writer's metrics; nil records nothing.
	Metrics *Metrics
	// OnFolderReady is called when a target's folder became writable, or it writes to a new
	// folder, so the watcher can send it a full snapshot.
	OnFolderReady func(types.NamespacedName)
	// AuthorEmailDomain completes authors' e-mail addresses; DefaultAuthorEmailDomain if empty.
	AuthorEmailDomain string
	// OnRequest is called (without locks held) when a CommitRequest's outcome is known.
	OnRequest func(key types.NamespacedName)
	// KeepDefaultedFields writes every field of an object, also those no field manager
	// owns (server defaults); by default they are left out unless Git already has them.
	KeepDefaultedFields bool
	// CompactLooseObjects is how many loose objects make a clone due for compaction after a
	// push (repo.CompactIfDue); 0 means repo.DefaultCompactLooseObjects, negative never.
	CompactLooseObjects int
	// CompactPacks is how many packfiles make a clone due for compaction, after a push or a
	// fetch that brought something; 0 means repo.DefaultCompactPacks, negative never.
	CompactPacks int
	// GitTimeout bounds each fetch and push: a server that accepts the connection and then
	// stops answering would otherwise hold its branch's worker (and every registration and
	// status read waiting for it) forever. 0 means DefaultGitTimeout.
	GitTimeout time.Duration
	// IndexKey names the build of the operator. When set, each worker keeps its targets'
	// folder indexes in its clone when it stops, and the first analysis after a restart by
	// the same build parses only the files that changed since (savedIndex). Empty: nothing
	// is kept.
	IndexKey string
	// Credentials says whether a Secret is some GitProvider's credentials (its
	// spec.secretRef), which no target writes, not even encrypted: a push token in the
	// repository would be readable by every recipient of its Secrets. An error fails the
	// window's plan, which is retried with backoff. nil: only the target's own provider's
	// (Encryption.KeySecrets).
	Credentials func(types.NamespacedName) (bool, error)
	// DrainTimeout bounds the last commits when the operator stops: each worker commits
	// and pushes its open windows at once instead of abandoning them, so a rolling upgrade
	// keeps the authors of the changes in flight and the deletions a restart could not see
	// again. 0 means DefaultDrainTimeout, negative abandons the windows (as a kill does).
	DrainTimeout time.Duration
}

// DefaultDrainTimeout is Options.DrainTimeout's default: within controller-runtime's
// 30 s graceful shutdown, with room for the other runnables to stop.
const DefaultDrainTimeout = 15 * time.Second

// DefaultGitTimeout is Options.GitTimeout's default: room for pushing a first snapshot of
// tens of thousands of files over a slow link, short enough that a hung server is noticed.
const DefaultGitTimeout = 2 * time.Minute

// gitTimeout resolves GitTimeout's default.
func (o Options) gitTimeout() time.Duration {
	if o.GitTimeout <= 0 {
		return DefaultGitTimeout
	}
	return o.GitTimeout
}

// compactLooseObjects resolves CompactLooseObjects' default and "never".
func (o Options) compactLooseObjects() int {
	return threshold(o.CompactLooseObjects, repo.DefaultCompactLooseObjects)
}

// compactPacks resolves CompactPacks' default and "never".
func (o Options) compactPacks() int { return threshold(o.CompactPacks, repo.DefaultCompactPacks) }

// threshold reads a compaction option: 0 is the default def, negative is "never" (0 for
// repo.SetCompactionThresholds).
func threshold(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

type workerKey struct {
	url    string
	branch string
}

// Manager owns one branch worker per repository (repo.RepositoryKey) and branch, and
// routes each GitTarget's changes to its worker. It runs only on the leader.
type Manager struct {
	opts Options
	// started is when this writer started writing (Start: the replica became leader; zero
	// before, see leadingSince); a CommitRequest created before may have been committed by
	// an earlier leader, which died before writing its status. Guarded by mu.
	started time.Time

	mu  sync.Mutex
	ctx context.Context
	// stopped is set once ctx ended and Start waits for the workers: none starts after it.
	stopped bool
	workers map[workerKey]*worker
	targets map[types.NamespacedName]workerKey
	// known holds each registered target's writer state, for Locate.
	known map[types.NamespacedName]*target
	// requests holds every CommitRequest handed in, by object key, until it is forgotten.
	requests map[types.NamespacedName]*requestState
	// sensitive holds each target's own sensitive resources, and encrypts whether it can
	// encrypt, for Locate.
	sensitive map[types.NamespacedName][]schema.GroupResource
	encrypts  map[types.NamespacedName]bool
	// parked holds the pending changes of suspended targets (SuspendTarget) and of targets
	// moving to another worker, by object key, for their next registration: a delete seen
	// while a target cannot write has no other way back (a snapshot only finds it as an
	// orphan).
	parked map[types.NamespacedName]map[ObjectKey]Change
	// judges holds, per suspended target, what its worker knew of its folder when it
	// stopped, by which its kept changes that change nothing in Git are forgotten
	// (collapseParked).
	judges map[types.NamespacedName]*parkedJudge
	// removed holds when each GitTarget was deleted (RemoveTarget), for removedMemory: a
	// delete event the watcher still routes to it then is not parked for a target that will
	// never register (or for one created again under its name, which lists its own state).
	removed map[types.NamespacedName]time.Time
	// joining counts, per worker, registrations between finding the worker and routing the
	// target to it, so that a worker about to gain a target is not retired meanwhile.
	joining map[workerKey]int
	// opening are the clones workerFor is opening, without m.mu; closed once done.
	opening map[workerKey]chan struct{}
	// retiring holds, per worker being retired, a channel closed once its goroutine ended
	// and its clone was closed: a new worker for the same clone waits for it.
	retiring map[workerKey]chan struct{}
	// home is the (repository, branch) of each registered or suspended target: its clone is
	// kept while any target calls it home, and deleted once none does.
	home map[types.NamespacedName]workerKey
	// journal keeps the deletions given and not written yet on disk, and recovered holds
	// those an earlier process left, per target, for its first registration.
	journal   *deleteJournal
	recovered map[types.NamespacedName]map[ObjectKey]recoveredDelete
	// watched holds, per target, the resources its rules watch (Watched), under wmu: a leaf
	// lock, so the watcher may call Watched under its own lock without ever waiting for m.mu
	// or a worker.
	wmu     sync.Mutex
	watched map[types.NamespacedName]map[schema.GroupVersionResource]bool
	// places holds where each registered target writes, for overlapPlan.
	places map[types.NamespacedName]place
	// shutOut holds, per target keeping a folder, the targets refused for overlapping it:
	// each is told (OnStatus) once the folder is let go (the holder deleted, or moved to
	// another repository), rather than at its controller's next poll, a minute of admission
	// denials later.
	shutOut map[types.NamespacedName][]types.NamespacedName
	// registering holds the turn of each (repository, branch) (holdRegistrations) while a
	// registration holds or waits for it: a GitTarget per pull request's branch adds none
	// that stays.
	registering map[workerKey]*registrationTurn
	wg          sync.WaitGroup
}

// requestState is a CommitRequest the writer knows and, once done, its outcome.
type requestState struct {
	req     CommitRequest
	outcome RequestOutcome
	// rehome says the request lost its queue (its target moved to another worker) and must
	// be handed to the new one; unplaced, that the target's registration there failed
	// since (set once the old worker let it go), so no queue can time it out meanwhile.
	rehome, unplaced bool
	// handedTo is the worker whose queue was given the request, where Forget withdraws it
	// (the target's current worker may be none while it moves).
	handedTo *worker
}

// NewManager builds a Manager; Start runs its workers.
func NewManager(opts Options) *Manager {
	if opts.OnStatus == nil {
		opts.OnStatus = func(types.NamespacedName) {}
	}
	if opts.Sensitive == nil {
		opts.Sensitive = CoreSecretsOnly
	}
	if opts.OnFolderReady == nil {
		opts.OnFolderReady = func(types.NamespacedName) {}
	}
	if opts.OnRequest == nil {
		opts.OnRequest = func(types.NamespacedName) {}
	}
	journal, recovered := openJournal(opts.WorkDir, opts.Log, time.Now())
	return &Manager{opts: opts, journal: journal, recovered: recovered, workers: map[workerKey]*worker{}, targets: map[types.NamespacedName]workerKey{},
		known: map[types.NamespacedName]*target{}, requests: map[types.NamespacedName]*requestState{},
		sensitive: map[types.NamespacedName][]schema.GroupResource{}, encrypts: map[types.NamespacedName]bool{}, parked: map[types.NamespacedName]map[ObjectKey]Change{},
		judges:  map[types.NamespacedName]*parkedJudge{},
		removed: map[types.NamespacedName]time.Time{}, watched: map[types.NamespacedName]map[schema.GroupVersionResource]bool{},
		places: map[types.NamespacedName]place{}, shutOut: map[types.NamespacedName][]types.NamespacedName{}, registering: map[workerKey]*registrationTurn{},
		joining: map[workerKey]int{}, opening: map[workerKey]chan struct{}{}, retiring: map[workerKey]chan struct{}{}, home: map[types.NamespacedName]workerKey{}}
}

// Start runs until ctx ends; workers created before or after Start run under ctx.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	m.started = time.Now() // when this replica leads: a standby's process started long before
	for _, w := range m.workers {
		m.run(w)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// NeedLeaderElection keeps writers on the leader only, so replicas never race on pushes.
func (m *Manager) NeedLeaderElection() bool { return true }

// run starts w's loop under its own context, so that retiring w stops it; nothing once the
// operator stops (a worker made then would drain outside Start's wait and the lease). Callers
// hold m.mu.
func (m *Manager) run(w *worker) {
	if m.stopped {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	w.stop, w.done = cancel, make(chan struct{})
	m.wg.Add(1)
	stopping := m.ctx // ends when the operator stops; ctx also ends when w retires
	go func() {
		defer m.wg.Done()
		defer close(w.done)
		w.loop(ctx)
		if stopping.Err() != nil {
			w.drain(m.opts.DrainTimeout)
		}
		w.saveIndexes()
	}()
}

// retireIfIdle stops the worker of wk once no GitTarget uses it (its last one deleted,
// suspended or moved to another repository or branch): its goroutine ends, its clone's
// open packfiles and caches are released and its metric series removed. A long-running
// operator whose targets come and go would otherwise keep every clone it ever opened.
// Once no target calls wk home either (none is suspended there), the clone is deleted
// from disk too, with or without a worker; a suspended target's stays, so it fetches only
// what changed when it comes back.
func (m *Manager) retireIfIdle(wk workerKey) {
	m.mu.Lock()
	for m.retiring[wk] != nil { // another retirement of wk first: this one may go further
		retired := m.retiring[wk]
		m.mu.Unlock()
		<-retired
		m.mu.Lock()
	}
	w := m.workers[wk]
	forget := !m.isHome(wk)
	if m.joining[wk] > 0 || m.opening[wk] != nil || m.routesTo(wk) || (w == nil && !forget) {
		m.mu.Unlock()
		return
	}
	delete(m.workers, wk)
	retired := make(chan struct{})
	m.retiring[wk] = retired
	var stop context.CancelFunc
	var done chan struct{}
	if w != nil {
		stop, done = w.stop, w.done
	}
	m.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	if w != nil {
		w.retire(forget)
	} else if err := repo.RemoveDir(m.cloneDir(wk)); err != nil {
		m.opts.Log.Error(err, "deleting the local clone no GitTarget uses any more", "repository", wk.url, "branch", wk.branch)
	}
	m.mu.Lock()
	delete(m.retiring, wk)
	m.mu.Unlock()
	close(retired)
}

// isHome reports whether a registered or suspended target calls wk home. Callers hold m.mu.
func (m *Manager) isHome(wk workerKey) bool {
	for _, k := range m.home {
		if k == wk {
			return true
		}
	}
	return false
}

// cloneDir is where the clone of wk lives under the work directory.
func (m *Manager) cloneDir(wk workerKey) string {
	sum := sha256.Sum256([]byte(wk.url + "\x00" + wk.branch))
	return filepath.Join(m.opts.WorkDir, hex.EncodeToString(sum[:8]))
}

// routesTo reports whether any registered target is routed to the worker of wk. Callers
// hold m.mu.
func (m *Manager) routesTo(wk workerKey) bool {
	for _, k := range m.targets {
		if k == wk {
			return true
		}
	}
	return false
}

// EnsureTarget registers or updates a target, refreshes its folder from the remote and
// returns its status. Errors are transient (remote unreachable, clone unusable).
func (m *Manager) EnsureTarget(ctx context.Context, spec TargetSpec) (TargetStatus, error) {
	me := place{wk: workerKeyOf(spec), folder: spec.Folder, created: spec.Created}
	release, err := m.holdRegistrations(ctx, me.wk, m.movingFrom(spec.Key, me))
	if err != nil {
		return TargetStatus{}, err // before anything changed: as if it had not been called
	}
	defer release()
	was, had, displace, err := m.reserve(spec.Key, me)
	if err != nil {
		return TargetStatus{}, err // before anything changed: as if it had not been called
	}
	if had && (was.wk != me.wk || was.folder != me.folder) {
		m.letGo(spec.Key) // its old folder: those it kept out may write there now
	}
	w, wk, err := m.workerFor(ctx, spec)
	if err != nil {
		m.mu.Lock()
		delete(m.places, spec.Key) // it writes nowhere: a new worker was needed and could not be made
		m.mu.Unlock()
		m.letGo(spec.Key)
		m.unplaced(spec.Key)
		return TargetStatus{}, err
	}
	// Only once it has a worker: a target that cannot register displaces nobody.
	defer m.displace(displace, spec)
	defer m.joined(wk)
	// The queue exists before changes are routed to the worker: none arrives to find no
	// place (making it waits for nothing, while ensureTarget may wait for a push).
	w.openQueue(spec.Key)
	if prev, had := m.route(spec.Key, wk); had && prev != wk { // it comes back from suspension elsewhere: its old clone may go
		defer m.retireIfIdle(prev)
	}
	// Its kept changes go first, into the queue made above: registering reports its folder
	// ready, and the snapshot that asks for may hand over its list before they would (a
	// listed object is then the committer's, and the kept change, older, only credited).
	m.unpark(spec.Key, w)
	t, st, err := w.ensureTarget(ctx, spec)
	if err != nil && !st.Known {
		w.unreadWithChanges(spec.Key)
	}
	if err == nil {
		st, err = w.syncKeys(ctx, spec.Key)
	}
	m.mu.Lock()
	m.known[spec.Key] = t
	m.places[spec.Key] = me
	m.sensitive[spec.Key] = spec.Sensitive
	m.encrypts[spec.Key] = spec.Encryption != nil
	m.mu.Unlock()
	return st, err
}

// movingFrom is the branch a target registering at me moves away from, nil when it does
// not move. A suspended target coming back elsewhere forgets what it knew of its old
// folder, which tells nothing of the new one (what was forgotten before stays forgotten: a
// known limit).
func (m *Manager) movingFrom(key types.NamespacedName, me place) *workerKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.judges[key]; j != nil && (j.wk != me.wk || j.folder != me.folder) {
		delete(m.judges, key)
	}
	if prev, ok := m.targets[key]; ok && prev != me.wk {
		return &prev
	}
	return nil
}

// reserve claims me for the target of key in one look at every target's place, so a
// registration beside this one sees it; it returns the target's place before (was, had)
// and the targets whose overlapping folders it takes over (displace). It refuses, changing
// nothing of key's, while the worker of me has been in a fetch or push for long
// (ErrRemoteBusy), or while an older target holds an overlapping folder (which then
// remembers key as shut out).
func (m *Manager) reserve(key types.NamespacedName, me place) (was place, had bool, displace []types.NamespacedName, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := m.workers[me.wk]; w != nil {
		if err := w.remoteStuck(time.Now()); err != nil {
			return place{}, false, nil, err
		}
	}
	holder, refuse, displace := overlapPlan(key, me, m.places)
	if refuse != nil {
		if !slices.Contains(m.shutOut[holder], key) {
			m.shutOut[holder] = append(m.shutOut[holder], key)
		}
		return place{}, false, nil, refuse
	}
	was, had = m.places[key]
	m.places[key] = me
	return was, had, displace, nil
}

// route sends the target's changes to the worker of wk from now on, and returns the branch
// whose clone it last called home, if any.
func (m *Manager) route(key types.NamespacedName, wk workerKey) (prev workerKey, had bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, had = m.home[key]
	m.targets[key], m.home[key] = wk, wk
	delete(m.removed, key)
	return prev, had
}

// registrationTurn is a (repository, branch)'s turn for registrations: a token, and the
// branch the registration holding it moves its target away from, if any (under m.mu).
type registrationTurn struct {
	token chan struct{}
	from  *workerKey
	// users counts the registrations holding or waiting for the turn; the last to leave
	// drops it from m.registering.
	users int
}

// holdRegistrations lets one registration at a time run on a (repository, branch): an
// older target registering displaces (suspends) the newer ones overlapping its folder,
// which must not be registering at that moment (the GitTarget controller runs several
// reconciles at once), or the newer one's registration would undo the suspension and take
// back the changes put aside for it. They would wait for each other on the branch's lock
// for the fetch anyway. The wait ends when ctx ends, or with ErrRemoteBusy while a fetch
// or push the holder waits for has taken longer than slowRemote: of this branch, or of the
// branch its target moves away from (from, when it moves). The controller's worker is then
// free for other GitTargets, and the registration retried with backoff. Call release when
// done.
func (m *Manager) holdRegistrations(ctx context.Context, wk workerKey, from *workerKey) (release func(), err error) {
	m.mu.Lock()
	turn := m.registering[wk]
	if turn == nil {
		turn = &registrationTurn{token: make(chan struct{}, 1)}
		m.registering[wk] = turn
	}
	turn.users++
	m.mu.Unlock()
	leave := func(held bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if held {
			turn.from = nil
		}
		if turn.users--; turn.users == 0 && m.registering[wk] == turn {
			delete(m.registering, wk)
		}
	}
	for {
		select {
		case turn.token <- struct{}{}:
			m.mu.Lock()
			turn.from = from
			m.mu.Unlock()
			return func() {
				leave(true)
				<-turn.token
			}, nil
		case <-ctx.Done():
			leave(false)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if err := m.holderStuck(wk, turn); err != nil {
			leave(false)
			return nil, err
		}
	}
}

// holderStuck is remoteStuck of the workers the registration holding turn may wait for.
func (m *Manager) holderStuck(wk workerKey, turn *registrationTurn) error {
	m.mu.Lock()
	waitsOn := []*worker{m.workers[wk]}
	if turn.from != nil {
		waitsOn = append(waitsOn, m.workers[*turn.from])
	}
	m.mu.Unlock()
	for _, w := range waitsOn {
		if w == nil {
			continue
		}
		if err := w.remoteStuck(time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// joined ends a registration that workerFor counted in m.joining, and retires the worker
// should the target have been removed meanwhile.
func (m *Manager) joined(wk workerKey) {
	m.mu.Lock()
	if m.joining[wk]--; m.joining[wk] <= 0 {
		delete(m.joining, wk)
	}
	idle := m.joining[wk] == 0 && !m.routesTo(wk)
	m.mu.Unlock()
	if idle {
		m.retireIfIdle(wk)
	}
}

// Status returns the last known status of a target.
func (m *Manager) Status(key types.NamespacedName) (TargetStatus, bool) {
	m.mu.Lock()
	wk, ok := m.targets[key]
	w := m.workers[wk]
	m.mu.Unlock()
	if !ok || w == nil {
		return TargetStatus{}, false
	}
	return w.status(key)
}

// watchedOf returns the resources target's rules watch, and false until Watched was called
// for it. Workers call it under their lock: wmu is taken after any other, and alone.
func (m *Manager) watchedOf(target types.NamespacedName) (map[schema.GroupVersionResource]bool, bool) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	set, ok := m.watched[target]
	return set, ok
}

// Watched tells the writer which resources the rules of target watch now (none: gvrs
// empty). status.orphans counts only theirs: a rule deleted, or edited to watch another
// resource, sends no snapshot of the resource it watched, and that snapshot's count would
// stay until a restart. The watcher calls it under its own lock, in the order of the rule
// changes; it takes only a leaf lock, and tells the target's controller when the set changed.
func (m *Manager) Watched(target types.NamespacedName, gvrs []schema.GroupVersionResource) {
	set := make(map[schema.GroupVersionResource]bool, len(gvrs))
	for _, gvr := range gvrs {
		set[gvr] = true
	}
	m.wmu.Lock()
	old, known := m.watched[target]
	m.watched[target] = set // replaced, never changed in place: watchedOf hands it out
	m.wmu.Unlock()
	if !known || !maps.Equal(old, set) {
		m.opts.OnStatus(target)
	}
}

// RemoveTarget forgets a deleted GitTarget and its pending changes; files in Git stay as
// they are. Its local clone goes too when no other target, registered or suspended, uses it.
func (m *Manager) RemoveTarget(key types.NamespacedName) {
	m.stopTarget(key, false, fmt.Sprintf("GitTarget %s was deleted before the request was committed", key))
}

// SuspendTarget stops writing for a GitTarget that cannot write for now (its GitProvider
// is gone, its branch not allowed) but keeps its pending changes, and those submitted
// meanwhile, as object keys for its next registration, so no delete seen in between is
// lost. Pending CommitRequests end as TargetRemoved, as with RemoveTarget, their message
// quoting why, the reason the target is Stalled.
func (m *Manager) SuspendTarget(key types.NamespacedName, why string) {
	m.stopTarget(key, true, suspendedMessage(key, why))
}

// suspendedMessage is the message of the CommitRequests a suspension of key ends.
func suspendedMessage(key types.NamespacedName, why string) string {
	return fmt.Sprintf("GitTarget %s stopped writing before the request was committed: %s; "+
		"create a new CommitRequest once it is Ready again", key, why)
}

// KeepChanges keeps the changes submitted for a GitTarget that exists but this writer does
// not write for yet, for its registration, as for a suspended one: admission lets changes
// through to a target that is only Reconciling (its credentials in their grace period when
// a new leader starts, a registration waiting for another's fetch, a GitTarget created
// again under a deleted one's name), and a deletion among them has no other way back. It
// also ends the deleted one's RemoveTarget, which kept nothing for that name. A registered
// target is left as it is.
func (m *Manager) KeepChanges(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.removed, key) // it exists
	if _, ok := m.targets[key]; !ok && m.parked[key] == nil {
		m.parked[key] = map[ObjectKey]Change{}
	}
}

// stopTarget stops writing for key, parking its pending changes when park is set; its
// pending CommitRequests end as TargetRemoved with settled as their message.
func (m *Manager) stopTarget(key types.NamespacedName, park bool, settled string) {
	m.stopTargetIf(key, park, settled, nil)
}

// forgetDeleted forgets what the Manager keeps of a deleted target beyond its
// registration (kept changes, its judge, its clone's home, its recovered deletions, the
// folders it waited for) and remembers it as removed. Callers hold m.mu.
func (m *Manager) forgetDeleted(key types.NamespacedName) {
	delete(m.parked, key)
	delete(m.judges, key)
	delete(m.home, key)
	delete(m.recovered, key)
	m.forgetRemovedBefore(time.Now().Add(-removedMemory)) // a target per pull request adds one each
	m.removed[key] = time.Now()
	for holder, out := range m.shutOut { // it waits for no folder any more
		if out = slices.DeleteFunc(out, func(k types.NamespacedName) bool { return k == key }); len(out) == 0 {
			delete(m.shutOut, holder)
		} else {
			m.shutOut[holder] = out
		}
	}
}

// openRequests lists the CommitRequests of the target of key not settled yet. Callers
// hold m.mu.
func (m *Manager) openRequests(key types.NamespacedName) []*CommitRequest {
	var out []*CommitRequest
	for _, st := range m.requests {
		if st.req.Target == key && !st.outcome.Done {
			out = append(out, &st.req)
		}
	}
	return out
}

// stopTargetIf is stopTarget when still, given key's place (and whether it has one), says
// so, judged under the same hold of m.mu as the stop: a target removed or moved since the
// caller looked is left alone. It reports whether it stopped key; nil still always does.
func (m *Manager) stopTargetIf(key types.NamespacedName, park bool, settled string, still func(place, bool) bool) bool {
	m.mu.Lock()
	if still != nil {
		if p, ok := m.places[key]; !still(p, ok) {
			m.mu.Unlock()
			return false
		}
	}
	wk, ok := m.targets[key]
	home, housed := m.home[key]
	delete(m.targets, key)
	delete(m.known, key)
	delete(m.places, key)
	delete(m.sensitive, key)
	delete(m.encrypts, key)
	w := m.workers[wk]
	if park {
		delete(m.removed, key) // it exists
		if m.parked[key] == nil {
			m.parked[key] = map[ObjectKey]Change{}
		}
	} else {
		m.forgetDeleted(key)
	}
	// Its requests now: one handed to its next registration while this stop waits for a
	// flush in progress (below) is that registration's.
	orphaned := m.openRequests(key)
	m.mu.Unlock()
	if !park {
		// Its folder, once its requests are settled. A suspended target keeps its folder
		// (controller.FolderHolder): those it keeps out are told when it is deleted or moves.
		defer m.letGo(key)
		m.wmu.Lock()
		delete(m.watched, key) // created again, it counts what its own snapshots find
		m.wmu.Unlock()
	}
	if ok && w != nil {
		// Waits for a flush in progress, which settles its own requests.
		if pending, judge := w.remove(key, park); park {
			m.judgeBy(key, judge)
			m.park(true, pending...)
		}
	}
	if !park {
		m.journal.forget(key) // after its queue is gone: no change of it is recorded since
	}
	switch {
	case ok:
		defer m.retireIfIdle(wk)
	case housed && !park: // deleted while suspended: its clone may be the last trace
		defer m.retireIfIdle(home)
	}
	for _, r := range orphaned {
		m.settle(r, landedBeforeStop(w, r, RequestOutcome{Done: true, Reason: ReasonTargetRemoved, Message: settled}))
	}
	return true
}

// Submit marks objects dirty on their targets. Changes of a suspended or moving target are
// kept for its next registration. Of a target not registered yet, a delete or a change
// with an author is kept too (and from then on every change, as for a suspended one); its
// other changes are ignored, since its initial snapshot lists them again once it registers.
func (m *Manager) Submit(changes ...Change) {
	byWorker := map[*worker][]Change{}
	var parked []Change
	var collapse []types.NamespacedName // suspended targets whose kept changes are looked at
	m.mu.Lock()
	for _, c := range changes {
		if w := m.workers[m.targets[c.Target]]; w != nil {
			byWorker[w] = append(byWorker[w], c)
		} else if p := m.parked[c.Target]; p != nil {
			p[c.Key] = keep(p, c) // in the same critical section as the decision: unpark cannot slip between
			m.keptChange(c.Target, c.Key)
			parked = append(parked, c)
			if m.collapseDue(c.Target, time.Now()) {
				collapse = append(collapse, c.Target)
			}
		} else if (c.Deleted && !c.Relisted || c.Author != "") && !m.recentlyRemoved(c.Target) {
			// A target not registered yet: a new leader's informers deliver events before the
			// GitTarget's first reconcile, and a GitTarget applied with its rule and objects
			// clones while they arrive. A delete is kept for it, since no list finds it
			// again, and so is a change with an author, whose record the event or first list
			// used up: the initial snapshot would bring the object under the committer.
			// Anything else reaches it with that snapshot.
			m.parked[c.Target] = map[ObjectKey]Change{c.Key: c}
			parked = append(parked, c)
		}
	}
	m.journal.record(parked...)
	m.mu.Unlock()
	for _, k := range collapse {
		go m.collapseParked(k)
	}
	for w, cs := range byWorker {
		if unplaced := w.submit(cs...); len(unplaced) > 0 {
			m.placeLate(unplaced)
		}
	}
}

// recentlyRemoved reports whether key's GitTarget was deleted less than removedMemory ago,
// forgetting the deletions older than that. Callers hold m.mu.
func (m *Manager) recentlyRemoved(key types.NamespacedName) bool {
	m.forgetRemovedBefore(time.Now().Add(-removedMemory))
	_, ok := m.removed[key]
	return ok
}

// forgetRemovedBefore drops the deleted GitTargets removed before cutoff from m.removed.
// Callers hold m.mu.
func (m *Manager) forgetRemovedBefore(cutoff time.Time) {
	for k, at := range m.removed {
		if at.Before(cutoff) {
			delete(m.removed, k)
		}
	}
}

// removedMemory is how long a deleted GitTarget's events are not kept for it: longer than
// its rules take to notice (their controllers watch GitTargets).
const removedMemory = 10 * time.Minute

// placeLate finds a place for changes a worker had no queue for: their target left it
// meanwhile (suspended, moved or removed; the queue is made before a target is routed to a
// worker). They are kept while it is suspended or moving, handed to the queue of the
// worker it moved to, and dropped only when it is gone.
func (m *Manager) placeLate(changes []Change) {
	byWorker := map[*worker][]Change{}
	m.mu.Lock()
	for _, c := range changes {
		if p := m.parked[c.Target]; p != nil {
			p[c.Key] = keep(p, c)
			m.keptChange(c.Target, c.Key)
			m.journal.record(c)
		} else if w := m.workers[m.targets[c.Target]]; w != nil {
			byWorker[w] = append(byWorker[w], c)
		}
	}
	m.mu.Unlock()
	for w, cs := range byWorker {
		w.submit(cs...)
	}
}

// workerKeyOf is the branch worker spec's target writes through: one per repository
// (repo.RepositoryKey) and branch, whichever GitProvider, and ssh user, reaches it.
func workerKeyOf(spec TargetSpec) workerKey {
	return workerKey{url: repo.RepositoryKey(spec.URL), branch: spec.Branch}
}

func (m *Manager) workerFor(ctx context.Context, spec TargetSpec) (*worker, workerKey, error) {
	wk := workerKeyOf(spec)
	m.moveAway(spec.Key, wk)
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		busy := m.retiring[wk] // its clone is still being closed
		if busy == nil {
			busy = m.opening[wk] // or opened, by another registration
		}
		if busy == nil {
			break
		}
		m.mu.Unlock()
		<-busy
		m.mu.Lock()
	}
	w, ok := m.workers[wk]
	if !ok {
		// Opened without m.mu: verifying a large clone takes seconds, and admission's
		// Locate must not wait for it (the webhook answers within its timeout).
		// Neither retired (retireIfIdle) nor swept (keptClones) meanwhile.
		opened := make(chan struct{})
		m.opening[wk] = opened
		m.mu.Unlock()
		r, err := openUnlocked(ctx, m.cloneDir(wk), spec)
		m.mu.Lock()
		delete(m.opening, wk)
		close(opened)
		if err != nil {
			return nil, wk, fmt.Errorf("opening the local clone of %s: %w", repo.Redact(spec.URL), err)
		}
		r.SetCompactionThresholds(m.opts.compactLooseObjects(), m.opts.compactPacks())
		if damage := r.RepairedDamage(); damage != nil {
			m.opts.Metrics.repaired()
			m.opts.Log.Info("local clone was damaged and has been rebuilt", "repository", wk.url, "branch", wk.branch, "damage", damage.Error())
		}
		w = newWorker(wk, r, m.opts, m.settle)
		w.watchedOf = m.watchedOf
		w.journal = m.journal
		m.workers[wk] = w
		if m.ctx != nil {
			m.run(w)
		}
	}
	m.joining[wk]++
	return w, wk, nil
}

// openUnlocked is repo.Open, called without m.mu: a panic in it is returned as an error,
// so that workerFor takes m.mu back and ends the open before unwinding.
func openUnlocked(ctx context.Context, dir string, spec TargetSpec) (r *repo.Repo, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("opening the clone panicked: %v", p)
		}
	}()
	return repo.Open(ctx, dir, spec.URL, spec.Auth)
}

// park keeps changes of suspended or moving targets, the last per object; older ones (a
// queue's content, taken while newer changes were already parked) never replace what is
// kept. A target registered again meanwhile (on another branch's worker: a stop waits for
// the old worker's lock, which a push may hold, and the target's registration elsewhere
// does not) gets them from its worker, as older changes; a removed one takes none, and its
// deletions among them leave the journal.
func (m *Manager) park(older bool, changes ...Change) {
	byWorker := map[*worker][]Change{}
	defer func() {
		for w, cs := range byWorker {
			if unplaced := w.enqueue(cs, older); len(unplaced) > 0 {
				m.park(older, unplaced...) // it left that worker meanwhile: kept, or handed on, again
			}
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	var gone []Change
	for _, c := range changes {
		p := m.parked[c.Target]
		if p == nil {
			if w := m.workers[m.targets[c.Target]]; w != nil {
				byWorker[w] = append(byWorker[w], c)
			} else if c.Deleted {
				gone = append(gone, c)
			}
			continue
		}
		m.keptChange(c.Target, c.Key)
		if kept, ok := p[c.Key]; ok && older {
			p[c.Key] = c.merge(kept) // the kept change is newer: its author stays
			continue
		}
		p[c.Key] = keep(p, c)
	}
	for _, c := range gone {
		// Its GitTarget was deleted while this was on its way: recorded by its queue after
		// RemoveTarget forgot the target's deletions, its line would reach one created again
		// under the name after a restart.
		m.journal.written(c.Target, []ObjectKey{c.Key})
	}
}

// keep is what parked changes p hold for c's object once c is added (Change.merge).
func keep(p map[ObjectKey]Change, c Change) Change {
	if kept, ok := p[c.Key]; ok {
		return kept.merge(c)
	}
	return c
}

// unpark hands a target whose queue now exists the changes kept while it was suspended
// or moving (an object its queue already holds stays in its newer window), and the
// CommitRequests that lost their queue as it moved (rehomed). Both go in one hand-over:
// a request whose author's changes were kept rides the window they open, and the worker
// cannot time it out in between, for want of a change that is on its way.
func (m *Manager) unpark(key types.NamespacedName, w *worker) {
	requests := m.rehomed(key, w)
	m.mu.Lock()
	p := m.parked[key]
	delete(m.parked, key)
	delete(m.judges, key)
	m.mu.Unlock()
	if len(p) == 0 && len(requests) == 0 {
		return
	}
	changes := make([]Change, 0, len(p))
	for _, c := range p {
		changes = append(changes, c)
	}
	if unplaced := w.enqueue(changes, true, requests...); len(unplaced) > 0 {
		// Its queue went meanwhile (the registration holds the branch's turn, so nothing
		// known does that): kept, or handed on, again, as park does.
		m.park(true, unplaced...)
	}
}

// moveAway takes a target off the worker it had when its repository or branch changed.
// The old worker's lock is taken without holding the Manager's, which a push can hold for
// seconds. Its pending CommitRequests are marked to be handed to the new worker.
func (m *Manager) moveAway(key types.NamespacedName, to workerKey) {
	m.mu.Lock()
	from, ok := m.targets[key]
	if !ok || from == to {
		m.mu.Unlock()
		return
	}
	old := m.workers[from]
	delete(m.targets, key)
	delete(m.places, key)     // registered again where it moved
	m.home[key] = to          // the old clone goes once no other target calls it home
	if m.parked[key] == nil { // changes arriving while it moves are kept for the new worker
		m.parked[key] = map[ObjectKey]Change{}
	}
	for _, st := range m.requests {
		if st.req.Target == key && !st.outcome.Done {
			st.rehome = true
		}
	}
	m.mu.Unlock()
	if old != nil {
		// Its pending changes follow it: EnsureTarget hands them to the new worker.
		m.park(true, old.removeTarget(key, false)...)
	}
	m.retireIfIdle(from)
}

// unplaced marks the CommitRequests of a moving target whose registration on its new worker
// failed: past their deadline they end TimedOut (Request), as no queue holds them.
func (m *Manager) unplaced(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, st := range m.requests {
		if st.req.Target == key && st.rehome {
			st.unplaced = true
		}
	}
}

// rehomed returns the target's CommitRequests that lost their queue, now handed to its
// current worker w, where they wait for their author's next change (or time out, saying
// so). One the old worker's last push answered while the target moved is settled and
// stays so.
func (m *Manager) rehomed(key types.NamespacedName, w *worker) (moved []*CommitRequest) {
	m.mu.Lock()
	for _, st := range m.requests {
		if st.req.Target == key && st.rehome {
			st.rehome, st.unplaced = false, false
			if !st.outcome.Done {
				moved = append(moved, &st.req)
				st.handedTo = w
			}
		}
	}
	m.mu.Unlock()
	return moved
}

// Location is where an object would land in a target's folder, as admission needs it.
type Location struct {
	// Path is the file already holding the object, or its canonical path; "" when it
	// cannot be planned.
	Path string
	// Problem says why the writer would refuse the object there (other objects hold the
	// path, the path cannot be planned, the file is encrypted and the target cannot
	// encrypt); "" when it would write it.
	Problem string
	// Encrypted says the object's document in Git is an encrypted file, which the writer
	// keeps encrypted whatever the resource: it refuses the object as it refuses a
	// sensitive one, when fields sops would leave readable hold values (ReadableFields).
	Encrypted bool
	// Absent says the folder, as the writer last read it, holds no document of the object:
	// its deletion removes nothing. False also when the folder was not read yet.
	Absent bool
	// RemovalProblem says why the writer would not remove the object's document from the
	// file holding it (a person's encrypted file of several objects, a file it never edits);
	// "" when it would, or when Git holds no document of it.
	RemovalProblem string
}

// Locate tells admission where an object would land in a target's folder: the file already
// holding it, or its canonical path, with the problem the writer would refuse it for. The
// zero Location for a target the writer does not know. It never waits for a push.
func (m *Manager) Locate(target types.NamespacedName, gvr schema.GroupVersionResource, kind, namespace, name string) Location {
	m.mu.Lock()
	t := m.known[target]
	sensitive := m.opts.Sensitive(gvr.GroupResource()) || slices.Contains(m.sensitive[target], gvr.GroupResource())
	encrypts := m.encrypts[target]
	m.mu.Unlock()
	if t == nil {
		return Location{}
	}
	folder := t.folder()
	idx := t.index.Load()
	if idx != nil && !idx.of(folder) {
		idx = nil // moved to another folder not read yet: the old one's files say nothing
	}
	id := ObjectKey{GVR: gvr, Kind: kind, Namespace: namespace, Name: name}.Identity()
	at := locateIn(target, folder, idx, id, gvr, sensitive, encrypts)
	if idx != nil {
		if loc, ok := idx.lookup(id); ok {
			at.RemovalProblem = removalProblem(idx, loc.File)
		} else {
			at.Absent = true
		}
	}
	return at
}

// removalProblem says why the writer would not remove a document from file (planRemove):
// Git holds file under a name the writer never reads, or it is an encrypted file of several
// objects. "" when it would.
func removalProblem(idx *folderIndex, file string) string {
	if problem := idx.pathProblem(file); problem != "" {
		return problem
	}
	if n := sharedEncryptedFile(idx, file); n > 0 {
		return sharedProblem(file, n)
	}
	return ""
}

// locateIn is Locate for object id in the folder of target as idx holds it (nil: not read
// yet), with the sensitivity of its resource and whether the target encrypts.
func locateIn(target types.NamespacedName, folder string, idx *folderIndex, id manifest.Identity, gvr schema.GroupVersionResource,
	sensitive, encrypts bool) Location {
	namespace, name := id.Namespace, id.Name
	if idx != nil {
		// A sensitive object's plaintext document (a person's) is moved into an encrypted
		// file at the canonical path: judged there, below, as the writer does.
		loc, ok := idx.lookup(id)
		problem := ""
		if ok {
			problem = idx.pathProblem(loc.File) // a person's file the writer does not edit
		}
		if problem != "" {
			return Location{Path: loc.File, Problem: problem, Encrypted: idx.isEncrypted(loc.File)}
		} else if ok && idx.isEncrypted(loc.File) && !encrypts {
			return Location{Path: loc.File, Problem: cannotEncrypt(target), Encrypted: true} // never written back in plaintext
		} else if ok && idx.isEncrypted(loc.File) {
			if n := sharedEncryptedFile(idx, loc.File); n > 0 {
				return Location{Path: loc.File, Problem: sharedProblem(loc.File, n), Encrypted: true}
			}
			return Location{Path: loc.File, Encrypted: true}
		} else if ok && !sensitive {
			return Location{Path: loc.File}
		} else if ok {
			return locateCanonical(folder, idx, id, gvr, namespace, name)
		}
		if other, problem := misnamespaced(&writePlan{}, idx, id); problem != "" {
			return Location{Path: other, Problem: problem}
		}
	}
	if !sensitive {
		p, err := plan.CanonicalPath(folder, gvr, namespace, name, false)
		if err != nil {
			return Location{Problem: err.Error()}
		}
		if idx != nil {
			if others := idx.holders(p); len(others) > 0 {
				return Location{Path: p, Problem: heldProblem(p, firstDocument(idx, others))}
			}
		}
		return Location{Path: p, Problem: idx.pathProblem(p)}
	}
	return locateCanonical(folder, idx, id, gvr, namespace, name)
}

// locateCanonical is Locate for a sensitive object id without an encrypted file: its
// canonical .sops.yaml path, which must hold nothing (placeSensitive). idx may be nil (not
// read yet).
func locateCanonical(folder string, idx *folderIndex, id manifest.Identity, gvr schema.GroupVersionResource, namespace, name string) Location {
	p, err := plan.CanonicalPath(folder, gvr, namespace, name, true)
	if err != nil {
		return Location{Problem: err.Error()}
	}
	if idx != nil {
		// Its own plaintext document there is no other object's, yet the file is taken.
		others := slices.DeleteFunc(idx.holders(p), func(o manifest.Identity) bool { return o == id })
		if len(others) > 0 {
			return Location{Path: p, Problem: heldProblem(p, firstDocument(idx, others))}
		}
		if idx.hasContent(p) {
			return Location{Path: p, Problem: takenProblem(p)}
		}
	}
	return Location{Path: p, Problem: idx.pathProblem(p)}
}
