package batch

import (
	"errors"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// ObjectKey names a watched object independently of its state: the worker keeps only these
// (the cluster holds the state), so pending work stays bounded however long Git is away.
type ObjectKey struct {
	GVR       schema.GroupVersionResource
	Kind      string
	Namespace string
	Name      string
}

// Identity is the key's version-independent identity, the one used to find the document in Git.
func (k ObjectKey) Identity() manifest.Identity {
	return manifest.Identity{Group: k.GVR.Group, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
}

// Change marks an object dirty for one GitTarget; the worker reads its state at commit time.
type Change struct {
	Target types.NamespacedName
	Key    ObjectKey
	// Deleted says the change is a delete its rule mirrors: the object was deleted, or
	// left the rule's selection. Only such a change (or a prune, Pruned) removes a
	// document: an object found gone at commit time after a change without one keeps its
	// document, since its delete, if a rule mirrors it, comes as a change of its own, and
	// none comes when the rule that selected it was deleted or narrowed meanwhile. It stays
	// until the commit, so that a snapshot listed before the delete cannot turn it into a
	// kept document.
	Deleted bool
	// CreateOnly says the change comes from a snapshot through rules that mirror creations
	// but not updates: the object's document is written only when Git has none, so such a
	// rule does not bring existing documents up to date at every start or rule change.
	CreateOnly bool
	// Author is the username the API server authenticated for the change, joined from
	// admission; empty when unknown (the commit is then authored by the committer).
	Author string
	// Pruned says a complete list under prune mode Always found the object gone, or out of
	// the selection of every rule that mirrors deletions: its document is removed at commit
	// time only while the target still prunes Always and no later list has found the object
	// keepable again (its rule no longer mirrors deletions, another rule selects it).
	Pruned bool
	// Relisted says the change comes from a list (a snapshot at start, after a re-list or a
	// rule change, or the prune it leads to), not from a write: it says nothing about who
	// changed the object, so an object already waiting in an author's window stays there,
	// with that author and the CommitRequests waiting on it.
	Relisted bool
	// Bookkeeping says the write changed nothing the writer commits (sanitize.SameWritten):
	// a cluster controller's record of its own work, a graceful delete setting
	// deletionTimestamp. An object waiting in a window stays there, with that window's
	// author; any other is its author's change as usual (a commit of it finds nothing to
	// write, unless Git's document holds a field no one owns).
	Bookkeeping bool
	// CoAuthors are the people whose earlier change of the object this one carries along
	// (queue.coAuthors): kept when a target's waiting changes are handed to its next
	// registration (queue.changes, a parked change), and credited on the commit that
	// writes the object.
	CoAuthors []string
}

// merge is what a newer change of the same object leaves waiting: its author, a delete
// when either was one (a delete already seen must not become a kept document), likewise a
// prune mark, and create-only only when both were. A relisted newer change keeps the older
// one's author.
func (c Change) merge(newer Change) Change {
	in := intentOf(c).merge(intentOf(newer)) // one rule for parked changes and queued ones
	newer.Deleted, newer.CreateOnly, newer.Pruned = in.deleted, in.createOnly, in.pruned
	var coAuthors []string
	for _, n := range c.CoAuthors {
		coAuthors = credited(coAuthors, n)
	}
	if newer.Relisted || newer.Bookkeeping {
		newer.Author, newer.Relisted, newer.Bookkeeping = c.Author, c.Relisted, c.Bookkeeping
	} else if c.Author != "" && c.Author != newer.Author { // a list by its creator's record is their change
		coAuthors = credited(coAuthors, c.Author) // as the queue credits an object leaving a window
	}
	for _, n := range newer.CoAuthors {
		coAuthors = credited(coAuthors, n)
	}
	newer.CoAuthors = slices.DeleteFunc(coAuthors, func(n string) bool { return n == newer.Author })
	if len(newer.CoAuthors) == 0 {
		newer.CoAuthors = nil
	}
	return newer
}

// Resolver gives the object's current state as the watch sees it, nil when it no longer
// exists, or one of the errors below. The watcher implements it from informer caches. A
// plan calls it from several goroutines at once (renderNew).
type Resolver interface {
	Current(target types.NamespacedName, key ObjectKey) (*unstructured.Unstructured, error)
}

// Holder is what a Resolver may also do: say whether its cache holds an object at the
// version the target watches, without copying it or judging its selection. While commits
// fail or a target is suspended, every object waiting is looked at, and only one the cache
// lacks can be forgotten (worker.collapseDeletes, Manager.collapseParked): Holds spares the
// copy Current makes of each of the others.
type Holder interface {
	Holds(target types.NamespacedName, key ObjectKey) bool
}

// held says whether r is a Holder that holds key for target.
func held(r Resolver, target types.NamespacedName, key ObjectKey) bool {
	h, ok := r.(Holder)
	return ok && h.Holds(target, key)
}

// ErrNotWatched is a Resolver's answer when nothing of the target watches an object any
// more (its rule was deleted or narrowed). The writer then leaves the object as Git has it —
// neither written nor removed — since a missing object there is no deletion; a rule that
// watches it again hands over its complete list.
var ErrNotWatched = errors.New("the object is not watched for this target")

// ErrNotSelected is a Resolver's answer for an object that exists but that no rule of the
// target selects any more (by its labels, or its namespace's). The writer removes its
// document only when the change it waits with is a delete its rule mirrored (the object
// left the selection: Change.Deleted); otherwise it leaves the document as Git has it,
// since deleting or narrowing a rule while a change waits deletes nothing.
var ErrNotSelected = errors.New("no rule of the target selects the object")

// ErrNotSynced is a Resolver's answer while the cache that would hold an object is not
// complete (a rule just replaced, a resource whose list keeps failing): absence there is no
// deletion. The writer commits the rest of the window and keeps that object dirty, retried
// with a backoff of its own, so one broken resource never holds back other changes.
var ErrNotSynced = errors.New("the cache of a watched resource has not synced yet")

// CoreSecretsOnly is the default sensitivity: core Secrets must never reach Git in plaintext.
func CoreSecretsOnly(gr schema.GroupResource) bool {
	return gr.Group == "" && gr.Resource == "secrets"
}

// Snapshot is the complete list, from a synced informer, of the objects of one resource a
// target claims. Folder documents of that resource in scope but absent from it are
// orphans: deleted (or deselected) while nobody watched.
type Snapshot struct {
	Target types.NamespacedName
	GVR    schema.GroupVersionResource
	Kind   string
	// InScope says whether a namespace ("" for cluster-scoped objects) was listed.
	InScope func(namespace string) bool
	Present []ObjectKey
	// Prunable says whether a rule that mirrors deletions would have selected an object
	// of namespace with labels (those of its document in Git) — nil: none mirrors them.
	// Under prune mode Always only such orphans are removed: a rule without DELETE keeps
	// its documents whatever the mode, even next to one with DELETE in the same namespace.
	Prunable func(namespace string, labels map[string]string) bool
	// Complete says every rule in the cluster was registered when the list was taken: a
	// namespace out of scope then is out of every rule's, not of one still to register.
	Complete bool
}

// Orphans lists the identities held in Git that a snapshot's scope covers but its list
// lacks, sorted. Pure: the caller decides what to do with them (spec.prune.mode).
func Orphans(inGit []manifest.Identity, s Snapshot) []manifest.Identity {
	present := make(map[manifest.Identity]bool, len(s.Present))
	for _, k := range s.Present {
		present[k.Identity()] = true
	}
	var out []manifest.Identity
	for _, id := range inGit {
		if id.Group == s.GVR.Group && id.Kind == s.Kind && s.InScope(id.Namespace) && !present[id] {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
