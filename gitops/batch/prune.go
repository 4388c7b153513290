package batch

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// Prune modes (GitTarget spec.prune.mode).
const (
	// PruneOnEvent mirrors deletions seen as events; orphans found by a full list are kept
	// and counted in status.
	PruneOnEvent = "OnEvent"
	// PruneAlways also removes orphans found by a complete list of the same scope.
	PruneAlways = "Always"
	// PruneNever never removes a document, not even on a delete event.
	PruneNever = "Never"
)

// Snapshot hands the writer a complete list for one resource of a target; see Orphans.
func (m *Manager) Snapshot(s Snapshot) {
	m.mu.Lock()
	wk, ok := m.targets[s.Target]
	w := m.workers[wk]
	var waiting []ObjectKey
	if ok && w != nil {
		waiting = m.recoveredOf(s.Target, s.GVR)
	}
	m.mu.Unlock()
	var recovered []Change
	if taken := takenBy(s, waiting); len(taken) > 0 { // judged without m.mu: InScope reads caches
		m.mu.Lock()
		recovered = m.takeRecovered(s.Target, taken, time.Now())
		m.mu.Unlock()
	}
	recovered, renamed := atVersion(recovered, s.GVR)
	if ok && w != nil {
		if unplaced := w.submitOlder(recovered...); len(unplaced) > 0 {
			m.placeLate(unplaced) // suspended or moved meanwhile: kept for it
		}
		m.journal.written(s.Target, renamed) // recorded again, under the version listed
		w.snapshot(s)
	}
}

// atVersion gives recovered deletions the version of the list that took them: the watcher
// knows objects by the version their rules resolve to now, which a CRD upgraded while the
// operator was down may have changed. renamed are their keys as the journal has them.
func atVersion(recovered []Change, gvr schema.GroupVersionResource) (out []Change, renamed []ObjectKey) {
	for i, c := range recovered {
		if c.Key.GVR != gvr {
			renamed = append(renamed, c.Key)
			recovered[i].Key.GVR = gvr
		}
	}
	return recovered, renamed
}

// recoveredOf lists the deletions of gvr's resource, at any version, an earlier process
// left unwritten for target (deleteJournal). Callers hold m.mu.
func (m *Manager) recoveredOf(target types.NamespacedName, gvr schema.GroupVersionResource) []ObjectKey {
	var out []ObjectKey
	for k := range m.recovered[target] {
		if k.GVR.GroupResource() == gvr.GroupResource() {
			out = append(out, k)
		}
	}
	return out
}

// takenBy picks the recovered deletions a snapshot hands over: those in the namespaces its
// list covered, or all once every rule was registered (Snapshot.Complete). They wait for
// such a list in this process: only then does the watcher know a rule of the target for the
// object, which decides, at commit time, whether the document goes (before, the object reads
// as not watched, and nothing would be written). One namespace's list is not another's: two
// rules (a WatchRule and a ClusterWatchRule) may bring one resource from different
// namespaces, registered one after the other. Pure.
func takenBy(s Snapshot, waiting []ObjectKey) []ObjectKey {
	var out []ObjectKey
	for _, k := range waiting {
		if s.Complete || s.InScope(k.Namespace) {
			out = append(out, k)
		}
	}
	return out
}

// takeRecovered takes the recovered deletions of keys for target, those still there and
// recorded within journalMaxAge of now: an older one, which a process waiting weeks for its
// list (a standby, a suspended target) still holds, counts as made while the operator was
// down, as a start would have dropped it. Callers hold m.mu.
func (m *Manager) takeRecovered(target types.NamespacedName, keys []ObjectKey, now time.Time) []Change {
	var out []Change
	for _, k := range keys {
		if d, ok := m.recovered[target][k]; ok {
			if now.Sub(d.At) <= journalMaxAge { // older, it counts as made while the operator was down
				out = append(out, d.Change)
			}
			delete(m.recovered[target], k)
		}
	}
	if len(m.recovered[target]) == 0 {
		delete(m.recovered, target)
	}
	return out
}

// snapshot counts the orphans of one resource and, under prune mode Always, marks those
// of rules that mirror deletions (Snapshot.Prunable) dirty: at commit time the cache says
// they are gone and their documents are removed (an object that reappeared meanwhile is
// written instead — deletion is always re-checked).
func (w *worker) snapshot(s Snapshot) {
	w.mu.Lock()
	t, ok := w.targets[s.Target]
	if !ok || t.index.Load() == nil {
		w.mu.Unlock()
		return
	}
	orphans := w.stillGone(s, Orphans(t.index.Load().identities(), s))
	var prune []manifest.Identity
	if t.spec.Prune == PruneAlways && s.Prunable != nil {
		prune = w.prunable(t, orphans, s.Prunable)
	}
	if t.orphans == nil {
		t.orphans = map[schema.GroupVersionResource]map[manifest.Identity]bool{}
	}
	before := t.orphanCount(everyResource)                            // what status shows: documents removed since count no more
	kept := make(map[manifest.Identity]bool, len(orphans)-len(prune)) // status counts the orphans kept, not those being removed
	for _, id := range orphans {
		kept[id] = true
	}
	for _, id := range prune {
		delete(kept, id)
	}
	t.orphans[s.GVR] = kept
	total := t.orphanCount(everyResource)
	ofList := w.ofList(s)
	forgot := t.forgetRefusalsOfGone(s, ofList) // always: not behind a short-circuit
	changed := before != total || forgot
	t.st.Orphans = total
	// Under w.mu, so no window is being committed (flushing): one the push puts back after
	// this list would otherwise keep a mark the list has dropped.
	w.unprune(s, prune, ofList)
	w.mu.Unlock()
	for _, id := range prune {
		// A removal the complete list showed: the object is gone, or out of the selection
		// of the rule that took its document in.
		w.submit(Change{Target: s.Target, Pruned: true, Relisted: true,
			Key: ObjectKey{GVR: s.GVR, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}})
	}
	if changed {
		w.opts.OnStatus(s.Target)
	}
}

// stillGone drops the orphans the cache holds now: objects created after the list was
// taken, whose documents a plan wrote (and forgot as orphans, forgetOrphans) before the
// snapshot arrived. Counted, they would read as orphans until the next list of their
// resource. Any answer but the object (gone, unselected, a cache not synced) keeps the
// list's word. Callers hold w.mu.
func (w *worker) stillGone(s Snapshot, orphans []manifest.Identity) []manifest.Identity {
	out := orphans[:0]
	for _, id := range orphans {
		key := ObjectKey{GVR: s.GVR, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}
		if obj, err := w.opts.Resolver.Current(s.Target, key); err == nil && obj != nil {
			continue
		}
		out = append(out, id)
	}
	return out
}

// unprune clears the prune mark of the target's waiting objects of the snapshot's resource
// that its list no longer prunes: a rule edited to keep them (DELETE removed, a selector
// narrowed or widened), a mode switched away from Always, or the object back. A namespace
// outside the snapshot's scope is pruned by none of the target's rules now (a snapshot
// carries all of them for its resource): its marks go too. Clearing one keeps a file, the
// safe way; a later list marks it again if it should go. Marks made at a version of the
// resource the target watches no more go by the same list (ofList).
// Callers hold w.mu, so no window of the target is being committed.
func (w *worker) unprune(s Snapshot, prune []manifest.Identity, ofList func(schema.GroupVersionResource) bool) {
	still := make(map[manifest.Identity]bool, len(prune))
	for _, id := range prune {
		still[id] = true
	}
	w.qmu.Lock()
	defer w.qmu.Unlock()
	q := w.queues[s.Target]
	if q == nil {
		return
	}
	for _, win := range q.windows {
		for k, in := range win.dirty {
			if in.pruned && ofList(k.GVR) && !still[k.Identity()] {
				in.pruned = false
				win.dirty[k] = in
			}
		}
	}
}

// prunable picks the orphans a rule that mirrors deletions would have selected, judged by
// the labels of their documents in Git at the remote tip; an orphan whose document cannot
// be read is kept, and so is one whose labels sops encrypted (a person's rule the writer
// keeps), which cannot be judged: `env notin (prod)` would select every ciphertext.
// Callers hold w.mu.
func (w *worker) prunable(t *target, orphans []manifest.Identity, selects func(string, map[string]string) bool) []manifest.Identity {
	ix, tree := t.index.Load(), w.repo.TreeReader(w.remoteTip)
	var out []manifest.Identity
	for _, id := range orphans {
		at, ok := ix.lookup(id)
		if !ok {
			continue
		}
		content, _, err := tree.ReadFile(at.File)
		if err != nil {
			continue
		}
		doc, err := manifest.Document(content, id)
		if err != nil || doc == nil {
			continue
		}
		labels := (&unstructured.Unstructured{Object: doc}).GetLabels()
		if !encryptedLabels(labels) && selects(id.Namespace, labels) {
			out = append(out, id)
		}
	}
	return out
}

// encryptedLabels says whether a label value is sops ciphertext ("ENC[AES256_GCM,…]"),
// which no label value of Kubernetes can be: those are letters, digits, '-', '_' and '.'.
// Pure.
func encryptedLabels(labels map[string]string) bool {
	for _, v := range labels {
		if strings.HasPrefix(v, "ENC[") {
			return true
		}
	}
	return false
}

// ofList says which versions of s's resource s speaks for: its own, and those the target
// watches no more. Once every rule moved to a new preferred version no list of the old one
// comes any more; while rules re-resolve one by one, a list of one version covers only the
// rules at it, and a late one must not undo what the other version's list just found.
func (w *worker) ofList(s Snapshot) func(schema.GroupVersionResource) bool {
	watched, known := map[schema.GroupVersionResource]bool(nil), false
	if w.watchedOf != nil {
		watched, known = w.watchedOf(s.Target)
	}
	return func(gvr schema.GroupVersionResource) bool {
		return gvr == s.GVR || gvr.GroupResource() == s.GVR.GroupResource() && known && !watched[gvr]
	}
}

// forgetRefusalsOfGone drops the refusals of objects a complete list of their resource no
// longer has in scope (deleted, or no longer selected): nothing is left to write. A refusal
// at a version the target watches no more goes too (ofList): no list of it comes again. It
// reports whether st.Refused changed. Callers hold w.mu.
func (t *target) forgetRefusalsOfGone(s Snapshot, ofList func(schema.GroupVersionResource) bool) bool {
	present := make(map[manifest.Identity]bool, len(s.Present))
	for _, k := range s.Present {
		present[k.Identity()] = true
	}
	gone := false
	for k := range t.refused {
		if ofList(k.GVR) && s.InScope(k.Namespace) && !present[k.Identity()] {
			delete(t.refused, k)
			gone = true
		}
	}
	if gone {
		t.listRefusals()
	}
	return gone
}
