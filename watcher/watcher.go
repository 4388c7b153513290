package watcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
	"github.com/gitops-reverser/gitops-reverser/watcher/attribution"
)

// Sink receives changes; the batch.Manager implements it.
type Sink interface {
	Submit(changes ...batch.Change)
	Snapshot(s batch.Snapshot)
	// Watched gives the resources a target's rules watch after a rule changed, in the
	// order of the changes (see batch.Manager.Watched); it must not wait for other locks.
	Watched(target types.NamespacedName, gvrs []schema.GroupVersionResource)
}

// Options configure a Watcher.
type Options struct {
	Client dynamic.Interface
	Sink   Sink
	// NamespaceLabels returns a namespace's labels (from a cache) for namespace selectors.
	NamespaceLabels func(name string) labels.Set
	// Sensitive says which resources the writer encrypts, and so writes whole (every field
	// but status and server metadata), to tell a write that changes nothing Git holds
	// (sanitize.SameWritten). Nil: core Secrets.
	Sensitive func(schema.GroupResource) bool
	// FreshNamespaceLabels is NamespaceLabels for events: it also asks the API server for a
	// namespace the cache has not seen yet (created a moment before the object, by the same
	// kubectl apply), so the change is not dropped. Only the event handlers use it, never
	// code under the writer's lock. Nil: NamespaceLabels.
	FreshNamespaceLabels func(name string) labels.Set
	// NamespaceKnown says whether NamespaceLabels' cache has the namespace. Current answers
	// batch.ErrNotSynced for an object a namespaceSelector might select in a namespace the
	// cache has not seen yet (created with the object), instead of "not selected", which
	// would leave it out of Git. Nil: every namespace is known.
	NamespaceKnown func(name string) bool
	Log            logr.Logger
	// Resync is the informers' resync period; 0 disables periodic resync.
	Resync time.Duration
	// Noise says which cluster-made objects are skipped.
	Noise Noise
	// Attribution holds the admission webhook's records of who made each write; nil
	// leaves every change unattributed.
	Attribution *attribution.Book
	// AttributionMetrics counts joins; nil counts nothing.
	AttributionMetrics *attribution.Metrics
	// KeepManagedFields keeps metadata.managedFields in the informer cache, for a writer
	// that leaves out the fields no manager owns; otherwise a transform drops them to save
	// memory (they are 20-30 % of an object).
	KeepManagedFields bool
	// OnWatchedChange is called (outside the watcher's lock) whenever the set of watched
	// resources or their operations may have changed: the admission webhook's rules follow.
	OnWatchedChange func()
	// RuleKeys lists the RuleKey of every WatchRule and ClusterWatchRule in the cluster
	// (ok false while that list is not known). Until SetRule has seen each of them, a
	// snapshot prunes nothing: after a restart the rules register one by one, and an object
	// that left the selection of one rule may still be selected by another not registered
	// yet. The snapshots held back are taken again once every rule is in. Nil: never held
	// back.
	RuleKeys func() (keys []string, ok bool)
}

// informer is one shared informer for one resource, started while any claim needs it.
type informer struct {
	inf cache.SharedIndexInformer
	// ctx ends when the informer stops (cancel), so nothing waits on it for longer.
	ctx    context.Context
	cancel context.CancelFunc
	// relisting is set while a snapshot waits for a re-list to be in; relisted is when the
	// last such snapshot was taken.
	relisting atomic.Bool
	relisted  atomic.Int64
	// handled is its event handler's registration: synced once the handler has had the
	// initial list.
	handled cache.ResourceEventHandlerRegistration
	// listErr is the last error listing or watching its resource gave, read while it has
	// not synced (ListProblems): a resource that cannot be listed is captured by nobody;
	// and after, while no list came in since (failingRelist).
	listErr atomic.Pointer[listError]
	// lists counts the lists that came in (listWatch).
	lists atomic.Int64
	// started is when it started: a first list taking longer than listPatience is reported
	// too (ListProblems).
	started time.Time
	// listed collects the initial list of an informer replacing another version's
	// (deletedWhileReplaced); nil for any other.
	listed *listedSet
	// predecessor is what the informer it replaced knew, until deletedWhileReplaced hands
	// over from it or a successor takes it (handOver); under the Watcher's mu.
	predecessor []interface{}
	// handledObjs is what its handler has had, by key (the objects the store holds too): the
	// store drops a deleted object before the handler has its delete, which may wait behind
	// a slow event for seconds (a namespace's labels asked of the API server). Under
	// handledMu, taken inside the Watcher's mu: a delete leaves it in the same hold of mu (a
	// read) as its handler reads the claims, so a rule moving to another version
	// (syncInformersLocked, holding mu) either finds the object here, and hands its delete
	// over, or left it to the handler with the claims it had (known).
	handledObjs map[string]interface{}
	handledMu   sync.Mutex
	// recording is set while its resource is watched at another version too; gone is then
	// the deletes its handler had within goneMemory, for a rule that moves here from the
	// other version (joinedLocked). Both under handledMu.
	recording bool
	gone      recentlyGone
	// resyncing holds the targets whose Resync waits for this informer's list
	// (types.NamespacedName keys). Another Resync of one of them adds nothing (the snapshot
	// follows the claims as they are once the list is in), so a list that keeps failing
	// keeps one waiter per target, not one per rule change or folder made writable.
	resyncing sync.Map
	// relabelling holds, per namespace, the labels before the first and after the last of
	// the relabels waiting for this informer's list (NamespaceRelabelled): handed over as
	// one, so a namespace relabelled again and again while the list keeps failing keeps one
	// waiter.
	relabelling   map[string]*pendingRelabel
	relabellingMu sync.Mutex
}

// pendingRelabel is a namespace's relabels waiting for an informer's list, as one change.
type pendingRelabel struct{ before, after labels.Set }

// awaitRelabel records a relabel of ns that waits for inf's list and reports whether one
// already waits, which then hands this one over too.
func (inf *informer) awaitRelabel(ns string, before, after labels.Set) (waits bool) {
	inf.relabellingMu.Lock()
	defer inf.relabellingMu.Unlock()
	if p := inf.relabelling[ns]; p != nil {
		p.after = after
		return true
	}
	if inf.relabelling == nil {
		inf.relabelling = map[string]*pendingRelabel{}
	}
	inf.relabelling[ns] = &pendingRelabel{before: before, after: after}
	return false
}

// takeRelabel returns, and forgets, the relabels of ns that waited for inf's list.
func (inf *informer) takeRelabel(ns string) (before, after labels.Set) {
	inf.relabellingMu.Lock()
	defer inf.relabellingMu.Unlock()
	p := inf.relabelling[ns]
	delete(inf.relabelling, ns)
	return p.before, p.after
}

// listedSet is the objects of an initial list by key, filled by an event handler and read
// by another goroutine.
type listedSet struct {
	mu   sync.Mutex
	objs map[string]interface{}
}

func (k *listedSet) add(o interface{}) {
	if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
		k.mu.Lock()
		k.objs[key] = o
		k.mu.Unlock()
	}
}

// take returns the set and empties it: it is read once.
func (k *listedSet) take() map[string]interface{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	objs := k.objs
	k.objs = map[string]interface{}{}
	return objs
}

// Watcher keeps one informer per watched resource and fans each event out to every claim.
// It runs only on the leader (the writer is there too).
type Watcher struct {
	opts Options

	mu        sync.RWMutex
	ctx       context.Context
	rules     map[string][]Claim // by RuleKey
	byGVR     map[schema.GroupVersionResource][]Claim
	informers map[schema.GroupVersionResource]*informer
	// registered holds every rule key SetRule has seen, with or without claims, so a new
	// leader can tell when it has loaded each existing rule once.
	registered map[string]bool
	// waiting are the rules registered by SetRuleWaiting, with their target: its snapshots
	// prune nothing until the rule is set again without waiting.
	waiting map[string]types.NamespacedName
	// unpruned are the targets whose snapshot pruned nothing because some rule was not
	// registered yet (Options.RuleKeys), or waited: snapshotted again once every rule is in.
	unpruned map[types.NamespacedName]bool
	started  chan struct{}
	// snapshotting orders the snapshots of one target and resource (snapshotNow): one
	// built from the rules before a change must not reach the writer after one built from
	// the rules after it. An entry lives while a snapshot holds or waits for it, so
	// targets and resources that come and go leave nothing behind.
	snapshotting map[snapshotKey]*snapshotTurn
	// relabelled holds, for relabelMemory, the labels each relabelled namespace had before
	// each change (NamespaceRelabelled), for the deletes handled after it (onDelete).
	relabelled map[string][]relabel
}

// relabel is a namespace's labels before a change, and when the change was seen.
type relabel struct {
	before labels.Set
	at     time.Time
}

// relabelMemory is how long a namespace's labels before a change still select the objects
// whose deletes are handled after it: an object deleted just before the relabel, whose
// delete waits in the handler's queue, is in no list the relabel reads.
const relabelMemory = time.Minute

// snapshotTurn is the lock of one snapshotKey and how many snapshots hold or wait for it.
type snapshotTurn struct {
	sync.Mutex
	users int
}

// snapshotKey names the snapshots snapshotNow orders.
type snapshotKey struct {
	target types.NamespacedName
	gvr    schema.GroupVersionResource
}

// New builds a Watcher; Start runs it.
func New(opts Options) *Watcher {
	if opts.NamespaceLabels == nil {
		opts.NamespaceLabels = func(string) labels.Set { return nil }
	}
	if opts.FreshNamespaceLabels == nil {
		opts.FreshNamespaceLabels = opts.NamespaceLabels
	}
	if opts.Sensitive == nil {
		opts.Sensitive = batch.CoreSecretsOnly
	}
	return &Watcher{
		opts:       opts,
		rules:      map[string][]Claim{},
		byGVR:      map[schema.GroupVersionResource][]Claim{},
		informers:  map[schema.GroupVersionResource]*informer{},
		registered: map[string]bool{},
		unpruned:   map[types.NamespacedName]bool{},
		waiting:    map[string]types.NamespacedName{},
		started:    make(chan struct{}),

		snapshotting: map[snapshotKey]*snapshotTurn{},
		relabelled:   map[string][]relabel{},
	}
}

// Start runs informers until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.syncInformersLocked(nil, nil) // no informer ran before: nothing moved
	close(w.started)
	w.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection keeps watches on the leader, next to the writer.
func (w *Watcher) NeedLeaderElection() bool { return true }

// SetRule replaces the claims of one rule, starts and stops informers to match, and sends a
// snapshot of every target whose claims changed: those of the new claims and of the old
// ones (a narrowed rule's orphans are counted again).
func (w *Watcher) SetRule(ruleKey string, claims []Claim) { w.setRule(ruleKey, claims, nil) }

// SetRuleWaiting is SetRule for a rule of target naming resources that discovery could not
// list this time, while an API of their groups failed it: its claims are watched as given,
// but until the rule is set again without waiting, no snapshot of target counts as
// complete (Snapshot.Complete: none prunes, nor hands over every recovered deletion) —
// those resources may select what the target's other rules no longer do. Other targets'
// snapshots, and the webhook's rules (Registered), are not held back.
func (w *Watcher) SetRuleWaiting(ruleKey string, target types.NamespacedName, claims []Claim) {
	w.setRule(ruleKey, claims, &target)
}

// setRule registers a rule's claims; waitingFor is the target a waiting rule holds back.
func (w *Watcher) setRule(ruleKey string, claims []Claim, waitingFor *types.NamespacedName) {
	w.mu.Lock()
	w.registered[ruleKey] = true
	if waitingFor != nil {
		w.waiting[ruleKey] = *waitingFor
	} else {
		delete(w.waiting, ruleKey)
	}
	if sameClaims(w.rules[ruleKey], claims) {
		w.mu.Unlock()
		for t := range w.takeUnpruned() { // it may be the last rule to register
			w.Resync(t)
		}
		return // a re-reconcile with nothing new must not trigger a full snapshot
	}
	old := w.rules[ruleKey]
	if len(claims) == 0 {
		delete(w.rules, ruleKey)
	} else {
		w.rules[ruleKey] = claims
	}
	w.rebuildLocked()
	joins := w.syncInformersLocked(old, claims)
	resync := targetsOf(claims)
	for t := range targetsOf(old) {
		resync[t] = true
	}
	w.tellWatchedLocked(resync)
	w.mu.Unlock()
	w.handJoined(joins)
	if w.opts.OnWatchedChange != nil {
		w.opts.OnWatchedChange()
	}
	for t := range w.takeUnpruned() {
		resync[t] = true
	}
	for t := range resync {
		w.Resync(t)
	}
}

// tellWatchedLocked gives the Sink the resources each of targets is watched for now. Under
// w.mu, so that two rule changes reach the writer in the order they were made. Callers hold
// w.mu for writing.
func (w *Watcher) tellWatchedLocked(targets map[types.NamespacedName]bool) {
	if w.opts.Sink == nil {
		return // a watcher that hands nothing on (tests of rules alone)
	}
	for t := range targets {
		var gvrs []schema.GroupVersionResource
		for gvr, claims := range w.byGVR {
			if slices.ContainsFunc(claims, func(c Claim) bool { return c.Target == t }) {
				gvrs = append(gvrs, gvr)
			}
		}
		w.opts.Sink.Watched(t, gvrs)
	}
}

// rulesLoaded reports whether SetRule has seen every rule in the cluster (Options.RuleKeys).
// Callers hold no lock.
func (w *Watcher) rulesLoaded() bool {
	if w.opts.RuleKeys == nil {
		return true
	}
	keys, ok := w.opts.RuleKeys()
	return ok && w.Registered(keys)
}

// waitsForAPI reports whether a rule of target waits for an API that failed discovery
// (SetRuleWaiting). Callers hold no lock.
func (w *Watcher) waitsForAPI(target types.NamespacedName) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, t := range w.waiting {
		if t == target {
			return true
		}
	}
	return false
}

// holdPrune marks target's snapshot as taken before every rule was in (without pruning,
// Snapshot.Complete false), so that it is taken again once they are, then looks again: the last
// rule may have registered between the look that held the prune back and the mark, when
// SetRule found nothing marked, and the rules' list may have failed for a moment. A look
// after rulesRetry covers the second; any later SetRule takes the mark too.
func (w *Watcher) holdPrune(target types.NamespacedName) {
	w.mu.Lock()
	w.unpruned[target] = true
	w.mu.Unlock()
	resyncHeld := func() {
		for t := range w.takeUnpruned() {
			w.Resync(t)
		}
	}
	resyncHeld()
	time.AfterFunc(rulesRetry, resyncHeld)
}

// rulesRetry is when holdPrune looks again whether every rule is registered.
const rulesRetry = 30 * time.Second

// takeUnpruned returns, once every rule is registered, the targets whose snapshots pruned
// nothing before and none of whose rules waits for an API, and forgets them. Callers hold
// no lock.
func (w *Watcher) takeUnpruned() map[types.NamespacedName]bool {
	w.mu.RLock()
	held := len(w.unpruned) > 0
	w.mu.RUnlock()
	if !held || !w.rulesLoaded() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	waits := map[types.NamespacedName]bool{}
	for _, t := range w.waiting {
		waits[t] = true
	}
	out := map[types.NamespacedName]bool{}
	for t := range w.unpruned {
		if !waits[t] {
			out[t] = true
			delete(w.unpruned, t)
		}
	}
	return out
}

// ForgetRule drops a deleted rule: its claims, as SetRule(ruleKey, nil) does, and its key,
// so a long-running leader whose rules come and go keeps no trace of the gone ones.
func (w *Watcher) ForgetRule(ruleKey string) {
	w.SetRule(ruleKey, nil)
	w.mu.Lock()
	delete(w.registered, ruleKey)
	w.mu.Unlock()
}

// RuleKey names a rule for SetRule: kind "WatchRule" with its namespace, or
// "ClusterWatchRule" with an empty one.
func RuleKey(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// Registered says whether SetRule has seen every one of the keys: until it has, Watched
// lacks some rule's resources, and a new leader must not narrow the webhook's rules to it.
func (w *Watcher) Registered(keys []string) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, k := range keys {
		if !w.registered[k] {
			return false
		}
	}
	return true
}

// WatchedResource is a resource the watcher captures, with the operations any claim on it
// acts on.
type WatchedResource struct {
	GVR                    schema.GroupVersionResource
	Create, Update, Delete bool
	// Namespaces lists the only namespaces any claim captures the resource in, sorted, when
	// every claim is a WatchRule's; nil when some claim takes any namespace (a
	// ClusterWatchRule's) or the resource is cluster-scoped.
	Namespaces []string
	// ByNamespaceLabels says some claim takes the resource from the namespaces a
	// namespaceSelector other than {} chooses: relabelling a namespace moves its objects
	// into or out of that claim, a change admission judges too.
	ByNamespaceLabels bool
}

// Watched lists the resources captured now, sorted, for the admission webhook's rules: the
// API server then sends exactly the writes the watcher acts on, never those of a resource a
// "*" left out.
func (w *Watcher) Watched() []WatchedResource {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]WatchedResource, 0, len(w.byGVR))
	for gvr, claims := range w.byGVR {
		r := WatchedResource{GVR: gvr}
		anywhere := false
		for _, c := range claims {
			r.Create, r.Update, r.Delete = r.Create || c.Create, r.Update || c.Update, r.Delete || c.Delete
			anywhere = anywhere || c.Namespace == ""
			r.ByNamespaceLabels = r.ByNamespaceLabels || (c.Resource.Namespaced && c.Namespace == "" && c.NamespaceSelector != nil && !c.NamespaceSelector.Empty())
			if c.Namespace != "" && !slices.Contains(r.Namespaces, c.Namespace) {
				r.Namespaces = append(r.Namespaces, c.Namespace)
			}
		}
		if anywhere {
			r.Namespaces = nil
		}
		slices.Sort(r.Namespaces)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GVR.String() < out[j].GVR.String() })
	return out
}

// Resync marks every object claimed by target dirty once the informers it needs have synced
// — the initial snapshot when a target starts, and again whenever its folder becomes
// writable — and hands the writer each resource's complete list, so it can find what Git
// holds that the cluster no longer does (spec.prune).
func (w *Watcher) Resync(target types.NamespacedName) {
	go func() {
		select {
		case <-w.started:
		case <-time.After(time.Minute):
			// Every caller runs once the watcher has started (on the leader): say so should
			// one ever not, rather than drop the snapshot silently.
			w.opts.Log.Info("snapshot not taken: the watcher did not start within a minute", "gitTarget", target.String())
			return
		}
		w.mu.RLock()
		infs := map[schema.GroupVersionResource]*informer{}
		for gvr, cs := range w.byGVR {
			if i := w.informers[gvr]; i != nil && slices.ContainsFunc(cs, func(c Claim) bool { return c.Target == target }) {
				infs[gvr] = i
			}
		}
		w.mu.RUnlock()
		// Each resource on its own: one whose list keeps failing (a conversion webhook or
		// an aggregated API down) must not hold back the others; its wait ends when its
		// informer stops.
		for gvr, inf := range infs {
			if _, waits := inf.resyncing.LoadOrStore(target, true); waits {
				continue
			}
			go func() {
				synced := cache.WaitForCacheSync(inf.ctx.Done(), func() bool { return inf.inf.HasSynced() && !inf.failingRelist() })
				// Before the snapshot reads the claims: a Resync from now on is either
				// covered by that read or waits on its own.
				inf.resyncing.Delete(target)
				if !synced {
					return
				}
				// The rules may have changed during a long wait: the snapshot, and what it
				// lets the writer prune, follows the target's claims as they are now, on
				// the informer still serving them (a replaced one's store is stale; the
				// rule change that replaced it resyncs on the new one).
				w.snapshotNow(target, gvr, inf)
			}()
		}
	}()
}

// snapshotNow snapshots target's objects of gvr on inf by its claims as they are now, one
// snapshot of them at a time, so they reach the writer in the order of the rules they
// were built from: a snapshot from the rules before a change (a DELETE dropped) arriving
// after one from the rules after it would prune, or keep, by the old ones. Whether every
// rule is in is read before the claims: a rule registered in between makes the snapshot
// incomplete (taken again), never complete without its claims.
func (w *Watcher) snapshotNow(target types.NamespacedName, gvr schema.GroupVersionResource, inf *informer) {
	turn := w.takeTurn(snapshotKey{target, gvr})
	defer w.endTurn(snapshotKey{target, gvr}, turn)
	complete := w.rulesLoaded() && !w.waitsForAPI(target)
	if cs := w.claimsOf(target, gvr, inf); len(cs) > 0 {
		w.snapshotWith(target, cs, inf.inf.GetStore().List(), complete)
	}
}

// takeTurn waits until no other snapshot of k runs.
func (w *Watcher) takeTurn(k snapshotKey) *snapshotTurn {
	w.mu.Lock()
	turn := w.snapshotting[k]
	if turn == nil {
		turn = &snapshotTurn{}
		w.snapshotting[k] = turn
	}
	turn.users++
	w.mu.Unlock()
	turn.Lock()
	return turn
}

// endTurn lets the next snapshot of k run, and forgets k when none waits.
func (w *Watcher) endTurn(k snapshotKey, turn *snapshotTurn) {
	turn.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if turn.users--; turn.users == 0 {
		delete(w.snapshotting, k)
	}
}

// claimsOf returns target's claims on gvr as they are now, none when inf no longer serves
// gvr.
func (w *Watcher) claimsOf(target types.NamespacedName, gvr schema.GroupVersionResource, inf *informer) []Claim {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.informers[gvr] != inf {
		return nil
	}
	var out []Claim
	for _, c := range w.byGVR[gvr] {
		if c.Target == target {
			out = append(out, c)
		}
	}
	return out
}

// snapshotWith submits every listed object some claim selects, then the complete list. The
// operations of the selecting claims decide how: claims that mirror creations but not
// updates only create missing documents; claims that mirror neither write nothing, though
// the object counts as present.
//
// complete says whether every rule was in when cs were read (snapshotNow).
func (w *Watcher) snapshotWith(target types.NamespacedName, cs []Claim, objs []interface{}, complete bool) {
	var changes []batch.Change
	var present []batch.ObjectKey
	// A namespace holding a listed object exists, whatever the namespace cache says (it may
	// lag for one created a moment ago): its documents are judged by its labels.
	listedIn := map[string]bool{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if ok {
			listedIn[u.GetNamespace()] = true
		}
		if !ok {
			continue
		}
		// Noise (kube-root-ca.crt, owned objects, … unless captured) is never written, yet
		// exists: a document of it, written while a capture flag was on, is no orphan.
		noise := w.opts.Noise.SkipObject(cs[0].Resource.GVR.GroupResource(), u)
		var ch *batch.Change
		create, update, selected := false, false, false
		unknownNamespace := !w.namespaceKnown(u.GetNamespace())
		for _, c := range cs {
			matches := c.Matches(u.GetNamespace(), u.GetLabels(), w.opts.NamespaceLabels)
			// A namespace the cache has not seen yet (created a moment before the list): its
			// object may be selected. Its add was left to this snapshot, so it is handed
			// over, and the writer waits until the cache can tell (batch.ErrNotSynced).
			if !matches && !(unknownNamespace && mayMatchByNamespace(c, u)) {
				continue
			}
			if ch == nil {
				first := change(c, u)
				ch = &first
			}
			create, update, selected = create || c.Create, update || c.Update, selected || matches
		}
		if ch == nil {
			continue
		}
		if selected { // one maybe selected is out of scope too (covered): neither present nor orphan
			present = append(present, ch.Key)
		}
		if (create || update) && !noise {
			ch.CreateOnly, ch.Relisted = !update, true
			ch.Author = w.createdBy(u, target)
			changes = append(changes, *ch)
		}
	}
	w.opts.Log.V(1).Info("snapshot", "gitTarget", target.String(), "resource", cs[0].Resource.GVR.String(), "objects", len(present))
	prunable := w.prunable(cs, listedIn)
	if !complete {
		// Orphans are counted, not pruned, and deletions recovered from the journal wait
		// unless their namespace was listed, until the snapshot taken once every rule is in.
		prunable = nil
		w.holdPrune(target)
	}
	w.opts.Sink.Submit(changes...)
	w.opts.Sink.Snapshot(batch.Snapshot{
		Target: target, GVR: cs[0].Resource.GVR, Kind: cs[0].Resource.Kind, Present: present,
		InScope:  w.covered(cs, listedIn),
		Prunable: prunable,
		Complete: complete,
	})
}

// recordListErrors keeps the errors of i's lists and watches for ListProblems, then has
// client-go log them as it would. Before i runs.
func (i *informer) recordListErrors() {
	_ = i.inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		i.noteListError(err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

// noteListError keeps err for ListProblems, unless it is how a watch ends in the normal
// course (closed, expired), which the reflector answers with a new watch or list.
func (i *informer) noteListError(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	i.listErr.Store(&listError{msg: listErrorMessage(err), rv: i.inf.LastSyncResourceVersion(), lists: i.lists.Load()})
}

// listWatch is the list and watch of i's resource (list, watchFn). Each list that comes in is
// counted (failingRelist): one returned whole, or one streamed as a watch once the API server
// marks the end of its initial events. relist is called as a list starts (afterRelist).
func (i *informer) listWatch(list func(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), relist func()) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			relist()
			out, err := list(ctx, opts)
			if err != nil {
				return nil, err
			}
			i.lists.Add(1)
			return out, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			streamed := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			if streamed {
				relist()
			}
			out, err := watchFn(ctx, opts)
			if err != nil || !streamed {
				return out, err
			}
			return newListEndWatch(out, func() { i.lists.Add(1) }), nil
		},
	}
}

// listEndWatch passes a streamed list's events on, and calls listed once it has passed on
// the bookmark that ends the initial events (the list is in).
type listEndWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newListEndWatch(in watch.Interface, listed func()) *listEndWatch {
	lw := &listEndWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(lw.out)
		for ev := range in.ResultChan() {
			select {
			case lw.out <- ev:
			case <-lw.stop:
				return
			}
			if ev.Type == watch.Bookmark && initialEventsEnd(ev.Object) {
				listed()
			}
		}
	}()
	return lw
}

// ResultChan implements watch.Interface.
func (lw *listEndWatch) ResultChan() <-chan watch.Event { return lw.out }

// Stop implements watch.Interface.
func (lw *listEndWatch) Stop() {
	lw.once.Do(func() {
		close(lw.stop)
		lw.in.Stop()
	})
}

// initialEventsEnd says whether obj, a bookmark, is the API server's mark of the end of a
// streamed list's initial events.
func initialEventsEnd(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

// failingRelist says whether i, synced, failed to list or watch since its last list came in:
// its watch broke and the re-list keeps failing (its permission taken away, a conversion
// webhook or aggregated API down). Its store is frozen as it was then, though the informer
// still says synced: what was created or deleted since is not in it, so it is neither
// read as the cluster's state (Current) nor compared with Git (Resync) until a list comes in
// (counted by listWatch; a quiet resource's list may return the resource version it had)
// or an event moves its resource version.
func (i *informer) failingRelist() bool {
	e := i.listErr.Load()
	return e != nil && i.inf.HasSynced() && i.lists.Load() == e.lists && i.inf.LastSyncResourceVersion() == e.rv
}

// listError is a list's or watch's error as ListProblems tells it, with the resource version
// and the count of lists the informer had then.
type listError struct {
	msg   string
	rv    string
	lists int64
}

// listErrorMessage is err's message without the query of the URL it quotes: a watch's
// carries a random timeoutSeconds, and a rule's status would change at every attempt.
func listErrorMessage(err error) string {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.RawQuery != "" {
			u.RawQuery = ""
			msg = strings.ReplaceAll(msg, ue.URL, u.String())
		}
	}
	return msg
}

// ListProblems says which of the resources of gvrs the watcher watches have not listed
// since their watch started: with the last error (a permission missing), or once they have
// tried for listPatience (an API server streaming the list holds it on an object a
// conversion webhook cannot convert); and whether any other is still listing
// (pending). Nothing of such a resource is captured until it lists, and a snapshot of its
// targets waits; a rule's status says so, and looks again while one is pending.
func (w *Watcher) ListProblems(gvrs []schema.GroupVersionResource) (problems []string, pending bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	now := time.Now()
	for _, gvr := range gvrs {
		inf := w.informers[gvr]
		switch {
		case inf == nil:
		case !inf.inf.HasSynced():
			problem := listProblem(gvr.GroupResource(), inf.listErr.Load(), now.Sub(inf.started))
			problems, pending = appendNonEmpty(problems, problem), pending || problem == ""
		case inf.failingRelist():
			problems = append(problems, fmt.Sprintf("%s cannot be listed or watched again since its watch broke, so changes to it are not "+
				"seen and nothing of it is written or pruned: %s", gvr.GroupResource(), inf.listErr.Load().msg))
		}
	}
	slices.Sort(problems)
	return slices.Compact(problems), pending
}

// listProblem is what to say of resource gr, not listed yet after trying for tried, whose
// last list or watch error was last (nil: none): "" while it may still list.
// The words change once, when tried reaches listPatience, and otherwise only with the
// error, so a rule's status is not written again at every look (a list retried every 30 s
// or more must not make it alternate). Pure.
func listProblem(gr schema.GroupResource, last *listError, tried time.Duration) string {
	switch {
	case tried < listPatience && last != nil:
		return fmt.Sprintf("%s cannot be listed: %s", gr, last.msg)
	case tried < listPatience:
		return ""
	case last != nil:
		return fmt.Sprintf("%s has not finished its first list in over a minute; its last error: %s", gr, last.msg)
	}
	return fmt.Sprintf("%s has not finished its first list in over a minute (an API server streaming a list holds it on an "+
		"object a conversion webhook cannot convert; a very large resource may take that long)", gr)
}

// listPatience is how long a resource's first list may take before a rule reports it.
const listPatience = time.Minute

// appendNonEmpty appends s to list unless it is empty. Pure.
func appendNonEmpty(list []string, s string) []string {
	if s == "" {
		return list
	}
	return append(list, s)
}

// Claims returns the claims registered for a rule, nil when none.
func (w *Watcher) Claims(ruleKey string) []Claim {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return slices.Clone(w.rules[ruleKey])
}

// NamespaceRelabelled hands the writer the objects of namespace ns that a claim's
// namespaceSelector selects with one of its label sets and not the other: they join their
// target (written, where the rule creates or updates) or leave it (removed, where the rule
// deletes). Call it after the cache NamespaceLabels reads has the new labels.
func (w *Watcher) NamespaceRelabelled(ns string, before, after labels.Set) {
	w.remember(ns, before, time.Now())
	flipped := map[schema.GroupVersionResource][]Claim{}
	infs := map[schema.GroupVersionResource]*informer{}
	w.mu.RLock()
	for gvr, cs := range w.byGVR {
		if inf := w.informers[gvr]; inf != nil {
			if f := flippedClaims(cs, before, after); len(f) > 0 {
				flipped[gvr], infs[gvr] = f, inf
			}
		}
	}
	w.mu.RUnlock()
	var changes []batch.Change
	for gvr, cs := range flipped {
		inf := infs[gvr]
		if !inf.inf.HasSynced() {
			// Its list is not complete yet, and the snapshot that follows it would not see a
			// namespace that left: hand the objects over once it is, by the rules as they are
			// then; from its labels before the first of the relabels that waited to those
			// after the last.
			if inf.awaitRelabel(ns, before, after) {
				continue
			}
			go func() {
				synced := cache.WaitForCacheSync(inf.ctx.Done(), inf.inf.HasSynced)
				before, after := inf.takeRelabel(ns) // a relabel from now on hands itself over
				if !synced {
					return
				}
				w.mu.RLock()
				var cs []Claim
				if w.informers[gvr] == inf { // a replaced informer's store is stale
					cs = flippedClaims(w.byGVR[gvr], before, after)
				}
				w.mu.RUnlock()
				w.opts.Sink.Submit(w.flippedChanges(cs, inf, ns, after)...)
			}()
			continue
		}
		changes = append(changes, w.flippedChanges(cs, inf, ns, after)...)
	}
	if len(changes) > 0 {
		w.opts.Log.V(1).Info("namespace relabelled", "namespace", ns, "objects", len(changes))
	}
	w.opts.Sink.Submit(changes...)
}

// flippedClaims are the claims of cs whose namespaceSelector selects a namespace with one
// of the label sets before and after and not the other, and whose operations mirror what
// that means: joining (creations or updates) or leaving (deletions).
func flippedClaims(cs []Claim, before, after labels.Set) []Claim {
	var out []Claim
	for _, c := range cs {
		if c.Resource.Namespaced && c.Namespace == "" && c.NamespaceSelector != nil &&
			c.NamespaceSelector.Matches(before) != c.NamespaceSelector.Matches(after) {
			joins := c.NamespaceSelector.Matches(after)
			if (joins && (c.Create || c.Update)) || (!joins && c.Delete) {
				out = append(out, c)
			}
		}
	}
	return out
}

// remember keeps ns's labels before a change for relabelMemory, each change's: relabelled
// twice within it, a namespace may have matched a selector only before the first.
func (w *Watcher) remember(ns string, before labels.Set, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, rs := range w.relabelled {
		rs = slices.DeleteFunc(rs, func(r relabel) bool { return now.Sub(r.at) > relabelMemory })
		if len(rs) == 0 {
			delete(w.relabelled, n)
		} else {
			w.relabelled[n] = rs
		}
	}
	w.relabelled[ns] = append(w.relabelled[ns], relabel{before: before, at: now})
}

// labelsBefore returns ns's labels before each change seen within relabelMemory.
func (w *Watcher) labelsBefore(ns string) []labels.Set {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []labels.Set
	for _, r := range w.relabelled[ns] {
		if time.Since(r.at) <= relabelMemory {
			out = append(out, r.before)
		}
	}
	return out
}

// flippedChanges is the changes of the claims cs of one resource whose namespaceSelector
// flipped for namespace ns, now labelled after, with each object's changes agreeing per
// target: the object is create-only only when every claim that takes it in is.
func (w *Watcher) flippedChanges(cs []Claim, inf *informer, ns string, after labels.Set) []batch.Change {
	var changes []batch.Change
	for _, c := range cs {
		changes = append(changes, w.inNamespace(c, inf, ns, !c.NamespaceSelector.Matches(after))...)
	}
	type object struct {
		target types.NamespacedName
		key    batch.ObjectKey
	}
	createOnly := map[object]bool{}
	for _, ch := range changes {
		o := object{ch.Target, ch.Key}
		if prev, seen := createOnly[o]; seen {
			createOnly[o] = prev && ch.CreateOnly
		} else {
			createOnly[o] = ch.CreateOnly
		}
	}
	for i := range changes {
		o := object{changes[i].Target, changes[i].Key}
		changes[i].CreateOnly = createOnly[o]
	}
	return changes
}

// inNamespace is a change of c for every object of inf in namespace ns that c's object
// selector takes and that is not noise: a removal when the namespace leaves c's selector,
// unless another claim of c's target still selects the object.
func (w *Watcher) inNamespace(c Claim, inf *informer, ns string, leaves bool) []batch.Change {
	objs, err := inf.inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		w.opts.Log.Error(err, "listing a relabelled namespace's objects", "namespace", ns, "resource", c.Resource.GVR.String())
		return nil
	}
	var changes []batch.Change
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || !c.ObjectSelector.Matches(labels.Set(u.GetLabels())) || w.opts.Noise.SkipObject(c.Resource.GVR.GroupResource(), u) {
			continue
		}
		if leaves && w.selects(c.Target, c.Resource.GVR, u) {
			continue // another rule of the target still selects it: its operations decide
		}
		ch := change(c, u)
		ch.Deleted = leaves
		ch.CreateOnly = !leaves && !c.Update // joins a rule that mirrors creations only
		// Joining, it is listed, as in a snapshot: the relabel says nothing about who changed
		// the object, so one waiting in an author's window stays there (with their
		// CommitRequests). Leaving is a removal, recorded in the journal as events are.
		ch.Relisted = !leaves
		changes = append(changes, ch)
	}
	return changes
}

// selects says whether a claim of target on gvr selects u now.
func (w *Watcher) selects(target types.NamespacedName, gvr schema.GroupVersionResource, u *unstructured.Unstructured) bool {
	w.mu.RLock()
	claims := w.byGVR[gvr]
	w.mu.RUnlock()
	return slices.ContainsFunc(claims, func(c Claim) bool {
		return c.Target == target && c.Matches(u.GetNamespace(), u.GetLabels(), w.opts.NamespaceLabels)
	})
}

// covered says whether any of cs covers a namespace.
// A namespace that no longer exists (not in listedIn, nor in the namespace cache) counts as
// covered by every claim that could have covered it.
func (w *Watcher) covered(cs []Claim, listedIn map[string]bool) func(ns string) bool {
	return func(ns string) bool {
		return slices.ContainsFunc(cs, func(c Claim) bool { return c.CoversNamespace(ns, w.opts.NamespaceLabels) }) ||
			(w.namespaceGone(ns, listedIn) && slices.ContainsFunc(cs, func(c Claim) bool { return c.couldHaveCovered(ns) }))
	}
}

// prunable says whether one of cs that mirrors deletions selects an object of a namespace
// with labels. For a namespace that no longer exists, whose labels are lost, it says
// whether every claim that could have selected the object mirrors deletions (and one
// could): its objects are gone for sure, but which rule took the document in cannot be
// told, and a rule without DELETE keeps its documents.
//
// A selector that matches no labels at all (an all-namespaces rule, `notin`) would take in
// a gone namespace by itself; the every-claim judgement keeps a rule without DELETE, whose
// selector took the namespace in while it existed, in charge of its documents.
func (w *Watcher) prunable(cs []Claim, listedIn map[string]bool) func(ns string, objLabels map[string]string) bool {
	return func(ns string, objLabels map[string]string) bool {
		if !w.namespaceGone(ns, listedIn) {
			return slices.ContainsFunc(cs, func(c Claim) bool { return c.Delete && c.Matches(ns, objLabels, w.opts.NamespaceLabels) })
		}
		could := 0
		for _, c := range cs {
			if c.couldHaveCovered(ns) && c.ObjectSelector.Matches(labels.Set(objLabels)) {
				if !c.Delete {
					return false
				}
				could++
			}
		}
		return could > 0
	}
}

// namespaceGone says whether namespace ns does not exist: no listed object is in it and the
// namespace cache, synced before any snapshot, lacks it. Without NamespaceKnown no
// namespace is gone.
func (w *Watcher) namespaceGone(ns string, listedIn map[string]bool) bool {
	return ns != "" && !listedIn[ns] && w.opts.NamespaceKnown != nil && !w.opts.NamespaceKnown(ns)
}

// Current implements batch.Resolver from the informer caches: the object as last seen, nil
// when it is gone, or batch.ErrNotSelected when it exists but no claim of target selects
// it (its labels, its namespace's, or it became noise). It is batch.ErrNotWatched when no
// claim of target covers the object's resource and namespace any more (its rule was
// deleted or narrowed), and
// batch.ErrNotSynced — the writer keeps the object dirty and retries it — while a covering
// claim's informer has not synced yet (a rule just replaced): absence from an incomplete
// cache is no deletion, and a deletion waiting in the window must not be dropped either.
func (w *Watcher) Current(target types.NamespacedName, key batch.ObjectKey) (*unstructured.Unstructured, error) {
	w.mu.RLock()
	gvr := w.watchedVersion(target, key)
	inf := w.informers[gvr]
	claims := w.byGVR[gvr]
	w.mu.RUnlock()
	covered := slices.ContainsFunc(claims, func(c Claim) bool { return c.covers(target, key) })
	switch {
	case !covered:
		return nil, batch.ErrNotWatched
	case inf == nil || !inf.inf.HasSynced() || inf.failingRelist():
		return nil, fmt.Errorf("%w: %s", batch.ErrNotSynced, key.GVR.Resource)
	}
	storeKey := storeKeyOf(key)
	o, exists, err := inf.inf.GetStore().GetByKey(storeKey)
	if err != nil {
		return nil, fmt.Errorf("reading %s from the cache: %w", storeKey, err)
	}
	if !exists {
		return nil, nil
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if w.opts.Noise.SkipObject(key.GVR.GroupResource(), u) {
		return nil, batch.ErrNotSelected // became noise: a removal only when one was seen
	}
	for _, c := range claims {
		if c.Target == target && c.Matches(u.GetNamespace(), u.GetLabels(), w.opts.NamespaceLabels) {
			return u.DeepCopy(), nil
		}
	}
	if w.namespaceUnknown(target, claims, u) {
		return nil, fmt.Errorf("%w: namespace %s", batch.ErrNotSynced, u.GetNamespace())
	}
	return nil, batch.ErrNotSelected
}

// Holds implements batch.Holder: whether the informer of the version target watches key's
// resource at holds the object, whatever its selection, without copying it.
func (w *Watcher) Holds(target types.NamespacedName, key batch.ObjectKey) bool {
	w.mu.RLock()
	inf := w.informers[w.watchedVersion(target, key)]
	w.mu.RUnlock()
	if inf == nil {
		return false
	}
	_, exists, err := inf.inf.GetStore().GetByKey(storeKeyOf(key))
	return err == nil && exists
}

// storeKeyOf is key's key in an informer's store (cache.MetaNamespaceKeyFunc).
func storeKeyOf(key batch.ObjectKey) string {
	if key.Namespace != "" {
		return key.Namespace + "/" + key.Name
	}
	return key.Name
}

// watchedVersion is the version of key's resource at which a claim of target covers it
// now: key's own when one does, else another version of the same resource, the first in
// order (a CRD whose preferred version changed while a change of the object waited, a
// deletion above all: the informer of the old version is gone, and its document would be
// left as an orphan; rules re-resolve one by one, so for a while a target may watch two
// versions), else key's. Documents in Git carry no version that matters for where they
// are. Callers hold w.mu.
func (w *Watcher) watchedVersion(target types.NamespacedName, key batch.ObjectKey) schema.GroupVersionResource {
	covers := func(c Claim) bool { return c.covers(target, key) }
	if slices.ContainsFunc(w.byGVR[key.GVR], covers) {
		return key.GVR
	}
	var others []schema.GroupVersionResource
	for gvr, claims := range w.byGVR {
		if gvr.GroupResource() == key.GVR.GroupResource() && slices.ContainsFunc(claims, covers) {
			others = append(others, gvr)
		}
	}
	if len(others) == 0 {
		return key.GVR
	}
	slices.SortFunc(others, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.Version, b.Version) })
	return others[0]
}

// covers says whether c is a claim of target on key's namespace.
func (c Claim) covers(target types.NamespacedName, key batch.ObjectKey) bool {
	return c.Target == target && (!c.Resource.Namespaced || c.Namespace == "" || c.Namespace == key.Namespace)
}

// namespaceUnknown says whether a claim of target selects namespaces by label, matches the
// object's labels, and the namespace cache has not seen the object's namespace yet: whether
// the object is selected cannot be told.
func (w *Watcher) namespaceUnknown(target types.NamespacedName, claims []Claim, u *unstructured.Unstructured) bool {
	if w.namespaceKnown(u.GetNamespace()) {
		return false
	}
	return slices.ContainsFunc(claims, func(c Claim) bool { return c.Target == target && mayMatchByNamespace(c, u) })
}

// namespaceKnown says whether the namespace cache has ns (always, without NamespaceKnown).
func (w *Watcher) namespaceKnown(ns string) bool {
	return w.opts.NamespaceKnown == nil || ns == "" || w.opts.NamespaceKnown(ns)
}

// mayMatchByNamespace says whether c selects namespaces by label and matches u's labels: it
// selects u if u's namespace has the right labels.
func mayMatchByNamespace(c Claim, u *unstructured.Unstructured) bool {
	return c.Resource.Namespaced && c.Namespace == "" && c.NamespaceSelector != nil && c.ObjectSelector.Matches(labels.Set(u.GetLabels()))
}

func (w *Watcher) rebuildLocked() {
	w.byGVR = map[schema.GroupVersionResource][]Claim{}
	keys := make([]string, 0, len(w.rules))
	for k := range w.rules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, c := range w.rules[k] {
			w.byGVR[c.Resource.GVR] = append(w.byGVR[c.Resource.GVR], c)
		}
	}
}

// syncInformersLocked starts informers for newly claimed resources and stops unclaimed ones.
// It returns the deletes owed to the claims of the rule that changed from old to claims
// that moved to an informer already running (joinedLocked).
func (w *Watcher) syncInformersLocked(old, claims []Claim) []joined {
	if w.ctx == nil {
		return nil
	}
	replaced := map[schema.GroupResource][]interface{}{}
	for gvr, inf := range w.informers {
		if _, ok := w.byGVR[gvr]; !ok {
			if known, ok := inf.handOver(); ok {
				replaced[gvr.GroupResource()] = known
			}
			inf.cancel()
			delete(w.informers, gvr)
		}
	}
	joins := w.joinedLocked(old, claims, replaced)
	for gvr := range w.byGVR {
		if _, ok := w.informers[gvr]; ok {
			continue
		}
		before, replacing := replaced[gvr.GroupResource()]
		if !replacing {
			before, replacing = w.otherVersionLocked(gvr)
		}
		inf := w.startInformer(gvr, replacing)
		w.informers[gvr] = inf
		if replacing {
			inf.predecessor = before
			go w.deletedWhileReplaced(gvr, inf)
		}
	}
	w.recordLocked()
	return joins
}

// handOver is what a stopping informer passes on to the one replacing it: what it knows
// once synced (known), and what its own predecessor knew while it has not handed over from
// it yet: replaced again before it listed (a CRD version whose conversion fails, the
// change rolled back), it would otherwise lose the deletes seen between the first stop and
// the last list. Callers hold w.mu.
func (i *informer) handOver() ([]interface{}, bool) {
	byKey := map[string]interface{}{}
	for _, o := range i.predecessor {
		if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			byKey[key] = o
		}
	}
	i.predecessor = nil
	if i.inf.HasSynced() {
		for _, o := range i.known() {
			if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
				byKey[key] = o // its own, newer
			}
		}
	} else if len(byKey) == 0 {
		return nil, false
	}
	objs := make([]interface{}, 0, len(byKey))
	for _, o := range byKey {
		objs = append(objs, o)
	}
	return objs, true
}

// otherVersionLocked returns what a synced informer of gvr's resource at another version,
// which other rules still claim, holds: a rule that moves to gvr (its CRD's served version
// changed) leaves that informer for its new one, and an object deleted before the new one
// lists reaches neither for the rule's target (deletedWhileReplaced, as for an informer
// replaced). Callers hold w.mu.
func (w *Watcher) otherVersionLocked(gvr schema.GroupVersionResource) ([]interface{}, bool) {
	for other, inf := range w.informers {
		if other != gvr && other.GroupResource() == gvr.GroupResource() && inf.inf.HasSynced() {
			return inf.known(), true
		}
	}
	return nil, false
}

// deletedWhileReplaced hands over, once inf's handler has had its initial list, the
// deletes of objects its predecessor on the same resource at another version held
// (informer.predecessor) that the list lacked: when a CRD's preferred version changes, the
// old version's informer stops at once and the new one lists a moment later, and an object
// deleted in between reaches neither (the list's objects are no events, and the snapshot
// would only count the document as an orphan). Likewise an object relabelled in between
// is handed over as that update, so one that left a claim's selection is removed (the
// snapshot would count it an orphan too). Judged against the initial list, not the store,
// so a delete or relabel after it is the handler's alone (once, with its author). An
// informer replaced again meanwhile hands over nothing: its successor does (handOver).
func (w *Watcher) deletedWhileReplaced(gvr schema.GroupVersionResource, inf *informer) {
	if inf.listed == nil || !cache.WaitForCacheSync(inf.ctx.Done(), inf.handled.HasSynced) {
		return
	}
	w.mu.Lock()
	before := inf.predecessor
	inf.predecessor = nil
	w.mu.Unlock()
	listed := inf.listed.take()
	w.mu.RLock()
	claims := w.byGVR[gvr]
	w.mu.RUnlock()
	for _, o := range before {
		key, err := cache.MetaNamespaceKeyFunc(o)
		if err != nil {
			continue
		}
		now, ok := listed[key]
		switch {
		case !ok:
			w.onDelete(gvr, o)
		case selectionChanged(claims, o, now):
			w.onEvent(gvr, o, now, false)
		}
	}
}

// selectionChanged says whether the labels of an object, before and now, differ in what
// a claim selects, or it is another object under the name (deleted and created again:
// onEvent tells both). Labels a conversion sets per version select alike. Pure.
func selectionChanged(claims []Claim, before, now interface{}) bool {
	b, okB := before.(*unstructured.Unstructured)
	n, okN := now.(*unstructured.Unstructured)
	if !okB || !okN {
		return false
	}
	if b.GetUID() != n.GetUID() {
		return true
	}
	for _, c := range claims {
		if c.ObjectSelector.Matches(labels.Set(b.GetLabels())) != c.ObjectSelector.Matches(labels.Set(n.GetLabels())) {
			return true
		}
	}
	return false
}

// startInformer starts the informer of gvr; replacing says it replaces one of the same
// resource at another version (deletedWhileReplaced).
func (w *Watcher) startInformer(gvr schema.GroupVersionResource, replacing bool) *informer {
	ctx, cancel := context.WithCancel(w.ctx)
	i := &informer{ctx: ctx, cancel: cancel, started: time.Now()}
	if replacing {
		i.listed = &listedSet{objs: map[string]interface{}{}}
	}
	// The dynamic informer's list and watch, with each list seen: a re-list (after a watch
	// expired or was cut) is compared with Git (afterRelist).
	resource := w.opts.Client.Resource(gvr)
	lw := i.listWatch(resource.List, resource.Watch, func() { w.afterRelist(gvr, i) })
	// Indexed by namespace: a namespace's new labels re-evaluate its objects only.
	i.inf = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, w.opts.Client),
		&unstructured.Unstructured{}, cache.SharedIndexInformerOptions{ResyncPeriod: w.opts.Resync,
			Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, ObjectDescription: gvr.String()})
	if !w.opts.KeepManagedFields && !ownershipSanitized(gvr) {
		_ = i.inf.SetTransform(dropManagedFields)
	}
	i.recordListErrors()
	w.handle(gvr, i)
	go i.inf.RunWithContext(ctx)
	w.opts.Log.Info("watching", "resource", gvr.String())
	return i
}

// handle registers the watcher's handlers on i, the informer of gvr.
func (w *Watcher) handle(gvr schema.GroupVersionResource, i *informer) {
	i.handledObjs = map[string]interface{}{}
	i.handled, _ = i.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o interface{}, initial bool) {
			if initial && i.listed != nil {
				i.listed.add(o)
			}
			w.eventWith(gvr, w.had(gvr, i, o), nil, o, initial)
		},
		UpdateFunc: func(old, o interface{}) {
			w.eventWith(gvr, w.had(gvr, i, o), old, o, false)
		},
		DeleteFunc: func(o interface{}) {
			u, ok := deletedObject(o)
			if !ok {
				return
			}
			w.mu.RLock()
			if key, err := cache.MetaNamespaceKeyFunc(u); err == nil {
				i.handledDelete(key, u, time.Now())
			}
			claims := w.byGVR[gvr]
			w.mu.RUnlock()
			w.deleted(gvr, claims, u)
		},
	})
}

// had records o, added or updated, as handled by i's handler (informer.handledObjs), and
// returns the claims of gvr it is judged by, read in the same hold of w.mu: a rule that
// moves to another version (syncInformersLocked) either finds the object as it was before,
// and hands its change over, or left it to this handler with the rule's claims.
func (w *Watcher) had(gvr schema.GroupVersionResource, i *informer, o interface{}) []Claim {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
		i.handledMu.Lock()
		i.handledObjs[key] = o
		i.handledMu.Unlock()
	}
	return w.byGVR[gvr]
}

// known is what an informer that has synced knows of, as its handler had it: what its
// handler has had (handledObjs) — with a delete that waits in its queue, dropped from the
// store already, and at the labels the handler last judged — and what its store holds that
// the handler has not had yet. An informer replaced, or left by a rule, may never hand
// those deletes and relabels to the rule's target (its queue is dropped when it stops, its
// claims are others' when they come): deletedWhileReplaced does, from this. Callers hold
// w.mu.
func (i *informer) known() []interface{} {
	stored := i.inf.GetStore().List()
	i.handledMu.Lock()
	defer i.handledMu.Unlock()
	objs := make([]interface{}, 0, len(i.handledObjs))
	for _, o := range i.handledObjs {
		objs = append(objs, o)
	}
	for _, o := range stored {
		if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			if _, had := i.handledObjs[key]; !had {
				objs = append(objs, o)
			}
		}
	}
	return objs
}

// afterRelist snapshots gvr for every target claiming it once a re-list the informer
// starts is in: a watch that expires or is cut is followed by a new list, whose changes
// reach the handlers as updates and tombstones, but a document changed or removed in Git
// meanwhile, an orphan, and what prune mode Always would remove are found only by
// comparing the whole list with the folder, as at start. The first list is Resync's. One
// snapshot waits at a time, however many lists fail before one succeeds, and at most one
// is taken per relistEvery. A list is taken to be in when the informer's resource version
// moves (set once the list is queued for the store; a list that returns the version already
// seen, nothing having changed anywhere, waits for the next event). The writer reads each
// object from the cache again when it commits, so an event the informer has not handed out
// when the snapshot is taken is not lost.
func (w *Watcher) afterRelist(gvr schema.GroupVersionResource, inf *informer) {
	if !inf.inf.HasSynced() || !inf.relisting.CompareAndSwap(false, true) {
		return
	}
	before := inf.inf.LastSyncResourceVersion()
	go func() {
		if !relistIn(inf, before) {
			inf.relisting.Store(false)
			return
		}
		inf.relisted.Store(time.Now().UnixNano())
		// A list from here on is waited for anew. Once cleared, the flag is the next
		// comparison's: this one's end leaves it alone.
		inf.relisting.Store(false)
		w.mu.RLock()
		targets := targetsOf(w.byGVR[gvr])
		w.mu.RUnlock()
		for target := range targets {
			w.opts.Log.Info("re-listed: comparing with Git", "gitTarget", target.String(), "resource", gvr.String())
			w.snapshotNow(target, gvr, inf)
		}
	}()
}

// relistIn waits until inf's resource version moves from before, and then until relistEvery
// has passed since the last comparison: a watch that keeps failing where its list works
// re-lists every backoff, and one comparison covers every list before it. False when the
// informer stops first.
func relistIn(inf *informer, before string) bool {
	tick := time.NewTicker(relistPoll)
	defer tick.Stop()
	for inf.inf.LastSyncResourceVersion() == before {
		select {
		case <-inf.ctx.Done():
			return false
		case <-tick.C:
		}
	}
	if wait := relistEvery - time.Since(time.Unix(0, inf.relisted.Load())); wait > 0 {
		select {
		case <-inf.ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
	return true
}

// relistPoll is how often afterRelist checks whether the re-list is in; relistEvery is the
// least time between two of its comparisons of one resource.
const (
	relistPoll  = 200 * time.Millisecond
	relistEvery = time.Minute
)

// ownershipSanitized says whether sanitizing the resource reads managedFields even when
// the writer keeps defaulted fields: a core Service's pinned clusterIP is told from an
// allocated one by who owns it (sanitize.Object). Services are few; their entries stay.
func ownershipSanitized(gvr schema.GroupVersionResource) bool {
	return gvr == schema.GroupVersionResource{Version: "v1", Resource: "services"}
}

// dropManagedFields keeps informer memory down when the writer does not read ownership;
// managedFields never reach Git anyway.
func dropManagedFields(o interface{}) (interface{}, error) {
	if acc, err := meta.Accessor(o); err == nil {
		acc.SetManagedFields(nil)
	}
	return o, nil
}

// onEvent fans one add or update out to every claim that selects the object now or did
// before: an object that stops matching leaves Git like a deleted one.
func (w *Watcher) onEvent(gvr schema.GroupVersionResource, oldObj, newObj interface{}, initial bool) {
	w.mu.RLock()
	claims := w.byGVR[gvr]
	w.mu.RUnlock()
	w.eventWith(gvr, claims, oldObj, newObj, initial)
}

// eventWith is onEvent judged by claims, gvr's as read when the event was taken (had).
func (w *Watcher) eventWith(gvr schema.GroupVersionResource, claims []Claim, oldObj, newObj interface{}, initial bool) {
	u, ok := newObj.(*unstructured.Unstructured)
	if !ok || initial {
		return // the initial list reaches targets through Resync
	}
	old, _ := oldObj.(*unstructured.Unstructured)
	if old != nil && old.GetUID() != "" && u.GetUID() != "" && old.GetUID() != u.GetUID() {
		// Deleted and created again while the watch was cut: the re-list reports one update.
		// Handled as what happened, the old object's deletion and the new one's creation, so
		// a rule that mirrors creations but not updates writes the new object (an update
		// would leave the old one's document as it is).
		w.deleted(gvr, claims, old)
		w.eventWith(gvr, claims, nil, u, false)
		return
	}
	gr := gvr.GroupResource()
	d := &eventDigest{join: w.opts.Attribution, old: old, u: u}
	changes, selected, updates := w.claimChanges(claims, gr, old, u, d)
	changes = perTarget(changes, selected)
	if len(changes) > 0 && updates && sanitize.SameWritten(old, u, w.opts.Sensitive(gr)) {
		// A cluster controller's record of its own work, a graceful delete setting
		// deletionTimestamp: authored as any write, it must not take the object out of the
		// window of the person whose change made its content (batch.Change.Bookkeeping).
		for i := range changes {
			changes[i].Bookkeeping = true
		}
	}
	if len(changes) > 0 {
		if d.take(); d.keyed {
			w.attribute(changes, d.key, old, u)
		}
	}
	w.opts.Sink.Submit(changes...)
}

// eventDigest is an event's attribution key and whether its write changed the object's
// content, worked out (sanitize, JSON, SHA-256) only once a claim selects the object now
// or did: an informer watches its resource in every namespace, for rules that take a few.
type eventDigest struct {
	join                   *attribution.Book
	old, u                 *unstructured.Unstructured
	key                    attribution.Key
	keyed, unchanged, done bool
}

// take works the digest out, once.
func (d *eventDigest) take() {
	if d.done {
		return
	}
	d.done = true
	d.key, d.keyed = attribution.KeyForEvent(d.old, d.u)
	d.unchanged = d.keyed && attribution.SameContent(d.key, d.old) && sameOwnership(d.old, d.u)
	if d.unchanged && d.join != nil {
		d.join.Join(d.key) // a record of a write that changed nothing is used up here
	}
}

// claimChanges is what each claim makes of an event that took old to u: the changes to
// hand the writer, the targets some claim of which selects the object now, and whether
// every change is an update of an object its claim selected before.
func (w *Watcher) claimChanges(claims []Claim, gr schema.GroupResource, old, u *unstructured.Unstructured, d *eventDigest) (changes []batch.Change, selected map[types.NamespacedName]bool, updates bool) {
	noiseNow := w.opts.Noise.SkipObject(gr, u)
	noiseBefore := old != nil && w.opts.Noise.SkipObject(gr, old)
	selected = map[types.NamespacedName]bool{}
	updates = true
	unknownNamespace := !w.namespaceKnown(u.GetNamespace())
	var befores []labels.Set
	if old != nil && !noiseBefore {
		befores = w.labelsBefore(old.GetNamespace())
	}
	for _, c := range claims {
		now := !noiseNow && c.Matches(u.GetNamespace(), u.GetLabels(), w.opts.FreshNamespaceLabels)
		was := old != nil && !noiseBefore && (c.Matches(old.GetNamespace(), old.GetLabels(), w.opts.FreshNamespaceLabels) ||
			matchedBefore(c, old, befores))
		selected[c.Target] = selected[c.Target] || now
		// A namespace the cache has not seen, whose labels the API server did not give
		// either (a timeout): the object may be selected. Its change is submitted, and the
		// writer waits (batch.ErrNotSynced) until the cache can tell; it does not count as
		// selected, so another rule's removal stands (the writer writes an object that is).
		now = now || (!noiseNow && unknownNamespace && mayMatchByNamespace(c, u))
		if now && was {
			d.take()
		}
		if now && was && d.unchanged {
			// A status write, or a write of the same content: nothing for Git, so the object
			// stays in the window (and with the author) of the change that made its content.
			continue
		}
		switch {
		case now && old == nil && c.Create, now && old != nil && (c.Update || (!was && c.Create)):
			ch := change(c, u)
			// Entering the selection of a rule that mirrors creations but not updates: a
			// creation for it, so only a document Git lacks is written (as a snapshot would).
			ch.CreateOnly = old != nil && !c.Update
			changes = append(changes, ch)
			updates = updates && now && was
		case !now && was && c.Delete:
			changes = append(changes, removal(c, u))
			updates = false
		}
	}
	return changes, selected, updates
}

// matchedBefore reports whether c selected old under one of its namespace's labels before
// a relabel a moment ago (befores). The relabel read the objects from the informer's store,
// which may already hold the object's next state, or no longer hold it, while its handler
// is behind: an object deleted, or one that left the selection by its own update, just as
// its namespace left too was in no list the relabel read, and only its handler can still
// remove it. Pure.
func matchedBefore(c Claim, old *unstructured.Unstructured, befores []labels.Set) bool {
	return slices.ContainsFunc(befores, func(b labels.Set) bool {
		return c.Matches(old.GetNamespace(), old.GetLabels(), func(string) labels.Set { return b })
	})
}

// perTarget makes the changes one event gives a target agree, since several rules of it
// may select the object: a rule's removal is dropped while another rule of the target
// still selects the object (selected), since those rules, with their own operations, decide.
func perTarget(changes []batch.Change, selected map[types.NamespacedName]bool) []batch.Change {
	kept := changes[:0]
	for _, c := range changes {
		if !(c.Deleted && selected[c.Target]) {
			kept = append(kept, c)
		}
	}
	return kept
}

// attribute sets the author of a stored change's Changes from the admission record, when
// there is one: the join is exact or nothing. obj is the object as the event has it: one
// seen for the first time may carry a later update's content (Book.JoinCreated).
func (w *Watcher) attribute(changes []batch.Change, k attribution.Key, old, obj *unstructured.Unstructured) {
	if k.Op != attribution.Create || w.opts.Attribution == nil {
		w.attributeWithin(changes, k, old, obj, 0)
		return
	}
	a, ok := w.opts.Attribution.JoinCreated(k, obj.GetResourceVersion())
	w.opts.AttributionMetrics.Lagged(k.Op, a, time.Now())
	w.authored(changes, a, ok)
}

// attributeWithin is attribute joining only a record made within that time (Book.JoinWithin).
// An update no record was made for is joined to a write through the scale subresource from
// the same version to the same replicas when it changed spec.replicas alone
// (attribution.ScaledOnly).
func (w *Watcher) attributeWithin(changes []batch.Change, k attribution.Key, old, obj *unstructured.Unstructured, within time.Duration) {
	if w.opts.Attribution == nil {
		return
	}
	a, ok, found := w.opts.Attribution.JoinWithinFound(k, within)
	if !found && k.Op == attribution.Update && attribution.ScaledOnly(old, obj) {
		a, ok = w.opts.Attribution.JoinWithin(attribution.ScaleKey(k.UID, k.OldResourceVersion, attribution.ReplicasOf(obj)), within)
	}
	if !ok && attribution.SameContent(k, old) {
		return // a status or metadata-only write: nothing for Git, nobody to attribute
	}
	w.opts.AttributionMetrics.Lagged(k.Op, a, time.Now())
	w.authored(changes, a, ok)
}

// createdBy is who created u, when target's first list of it shows it as its create left it
// (Book.CreatedBy), else "": a list is no one's change.
func (w *Watcher) createdBy(u *unstructured.Unstructured, target types.NamespacedName) string {
	if w.opts.Attribution == nil {
		return ""
	}
	a, _ := w.opts.Attribution.CreatedBy(u.GetUID(), target, func() (attribution.Key, bool) { return attribution.KeyForEvent(nil, u) })
	return a.Username
}

// authored counts a join and, when it found the author, sets it on changes.
func (w *Watcher) authored(changes []batch.Change, a attribution.Author, ok bool) {
	w.opts.AttributionMetrics.Observe(ok)
	if !ok {
		return
	}
	for i := range changes {
		changes[i].Author = a.Username
	}
}

// onDelete fans a delete of gvr's object o out to the claims of gvr now.
func (w *Watcher) onDelete(gvr schema.GroupVersionResource, o interface{}) {
	u, ok := deletedObject(o)
	if !ok {
		return
	}
	w.mu.RLock()
	claims := w.byGVR[gvr]
	w.mu.RUnlock()
	w.deleted(gvr, claims, u)
}

// deletedObject is the object a delete notification carries, a tombstone's too.
func deletedObject(o interface{}) (*unstructured.Unstructured, bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	return u, ok
}

// deleted fans the delete of gvr's object u out to claims: gvr's, as read when the delete
// was taken (under w.mu, with what the handler had: handle).
func (w *Watcher) deleted(gvr schema.GroupVersionResource, claims []Claim, u *unstructured.Unstructured) {
	if w.opts.Noise.SkipObject(gvr.GroupResource(), u) {
		return
	}
	// A namespace deleted before its objects' deletes are handled still has its labels here
	// (FreshNamespaceLabels remembers them for a while: DeletedNamespaces).
	// So are those of a namespace relabelled a moment ago, by its labels before: an object
	// deleted just before, whose delete waited in this handler's queue, was in no list the
	// relabel read. Unless a claim of the target still selects the object: as at the
	// relabel (inNamespace), its operations decide.
	var changes []batch.Change
	if befores := w.labelsBefore(u.GetNamespace()); len(befores) > 0 {
		changes = removalsAfterRelabel(claims, u, w.opts.FreshNamespaceLabels(u.GetNamespace()), befores)
	} else {
		for _, c := range claims {
			if c.Delete && c.Matches(u.GetNamespace(), u.GetLabels(), w.opts.FreshNamespaceLabels) {
				changes = append(changes, removal(c, u))
			}
		}
	}
	if len(changes) > 0 && u.GetUID() != "" && w.opts.Attribution != nil {
		k := attribution.DeleteKey(u.GetUID())
		if at, waited := deleteRequested(u); waited {
			a, ok := w.opts.Attribution.JoinRequestedAt(k, at, immediateDeleteWindow)
			w.authored(changes, a, ok)
		} else {
			w.attributeWithin(changes, k, nil, nil, immediateDeleteWindow)
		}
	}
	w.opts.Sink.Submit(changes...)
}

// removalsAfterRelabel is the removals of claims for u, deleted in a namespace labelled now
// and relabelled a moment ago from each of befores: a claim that mirrors deletions removes
// it when it selects it by the labels now or by any before, unless (for a before) a claim of
// its target still selects it now. Pure.
func removalsAfterRelabel(claims []Claim, u *unstructured.Unstructured, now labels.Set, befores []labels.Set) []batch.Change {
	labelled := func(set labels.Set) func(string) labels.Set { return func(string) labels.Set { return set } }
	selectedNow := map[types.NamespacedName]bool{}
	for _, c := range claims {
		if c.Matches(u.GetNamespace(), u.GetLabels(), labelled(now)) {
			selectedNow[c.Target] = true
		}
	}
	var changes []batch.Change
	for _, c := range claims {
		if !c.Delete {
			continue
		}
		matched := c.Matches(u.GetNamespace(), u.GetLabels(), labelled(now)) ||
			(!selectedNow[c.Target] && matchedBefore(c, u, befores))
		if matched {
			changes = append(changes, removal(c, u))
		}
	}
	return changes
}

// immediateDeleteWindow is how long after its request the delete event of an object
// deleted at once (no finalizer, no grace period) may come: the watch's lag.
const immediateDeleteWindow = 30 * time.Second

// deleteRequested is when the delete of u, in its final state, was asked for, if it waited
// for finalizers or a grace period (its deletionTimestamp less the grace period): its event
// may come minutes after the request. An object deleted at once has no deletionTimestamp,
// and its event follows the request within the watch's lag (immediateDeleteWindow). Pure.
func deleteRequested(u *unstructured.Unstructured) (time.Time, bool) {
	ts := u.GetDeletionTimestamp()
	if ts == nil {
		return time.Time{}, false
	}
	at := ts.Time
	if grace := u.GetDeletionGracePeriodSeconds(); grace != nil {
		at = at.Add(-time.Duration(*grace) * time.Second)
	}
	return at, true
}

// removal is change for an object deleted, or gone out of c's selection, which c mirrors.
func removal(c Claim, u *unstructured.Unstructured) batch.Change {
	ch := change(c, u)
	ch.Deleted = true
	return ch
}

func change(c Claim, u *unstructured.Unstructured) batch.Change {
	return batch.Change{
		Target: c.Target,
		Key: batch.ObjectKey{
			GVR: c.Resource.GVR, Kind: c.Resource.Kind,
			Namespace: u.GetNamespace(), Name: u.GetName(),
		},
	}
}

func targetsOf(claims []Claim) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, c := range claims {
		out[c.Target] = true
	}
	return out
}

// lastAppliedAnnotation is where kubectl apply keeps what it applied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// sameOwnership says whether two versions of an object give the writer the same idea of
// who owns which field: the same managedFields entries of the object itself (status
// subresource entries and timestamps aside) and the same last-applied configuration. The
// writer keeps only owned fields by default, so a write that changes ownership alone (a
// server-side apply pinning a field at its current value) changes what it writes.
func sameOwnership(old, obj *unstructured.Unstructured) bool {
	return old.GetAnnotations()[lastAppliedAnnotation] == obj.GetAnnotations()[lastAppliedAnnotation] &&
		reflect.DeepEqual(objectOwnership(old), objectOwnership(obj))
}

// objectOwnership lists the managedFields entries of the object itself, without times.
func objectOwnership(obj *unstructured.Unstructured) []any {
	entries, _, _ := unstructured.NestedSlice(obj.Object, "metadata", "managedFields")
	var out []any
	for _, e := range entries {
		entry, ok := e.(map[string]any)
		if !ok {
			out = append(out, e)
			continue
		}
		if sub, _ := entry["subresource"].(string); sub != "" {
			continue
		}
		kept := make(map[string]any, len(entry))
		for k, v := range entry {
			if k != "time" {
				kept[k] = v
			}
		}
		out = append(out, kept)
	}
	return out
}
