package batch

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// parkedJudge is what a suspended target's worker knew of its folder when it stopped, by
// which collapseParked forgets the kept changes that would change nothing in Git: while a
// target is suspended (its GitProvider gone for days, say), the deletes of the Pods and Jobs
// that GitOps controllers and others admission lets through create and delete would
// otherwise be kept, each, until it comes back.
type parkedJudge struct {
	// ix is the folder's index at the tip last read; sound says it is of the folder at
	// the tip last fetched, and no push of the target's may have landed unseen: only then
	// does a document it lacks tell that Git lacks it.
	ix    *folderIndex
	sound bool
	// wk and folder are where the target wrote: registered elsewhere, even while its
	// registration fails, it judges no more (Manager.EnsureTarget).
	wk     workerKey
	folder string
	// touched holds, per object, the tick of its last kept change since the suspension
	// (Manager.keptChange): one changed while collapseParked looked is not forgotten.
	touched map[ObjectKey]uint64
	tick    uint64
	// lookedAt is when collapseParked last began, and looking says it runs now.
	lookedAt time.Time
	looking  bool
}

// absent says whether Git lacked k's document when the target stopped, as far as a sound
// index tells.
func (j *parkedJudge) absent(k ObjectKey) bool {
	if !j.sound || j.ix == nil {
		return false
	}
	_, inGit := j.ix.lookup(k.Identity())
	return !inGit
}

// judgeBy makes judge (nil: none) the one of suspended target key, whose changes are kept
// (SuspendTarget).
func (m *Manager) judgeBy(key types.NamespacedName, judge *parkedJudge) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if judge != nil && m.parked[key] != nil {
		judge.lookedAt = time.Now() // a first look after collapseEvery: a short suspension keeps all
		m.judges[key] = judge
	}
}

// keptChange records, for key's judge, that the kept change of obj changed (parked,
// merged, replaced). Callers hold m.mu.
func (m *Manager) keptChange(key types.NamespacedName, obj ObjectKey) {
	if j := m.judges[key]; j != nil {
		j.tick++
		j.touched[obj] = j.tick
	}
}

// collapseDue says whether collapseParked should look at key's kept changes now: it has a
// judge that is idle and has not looked for collapseEvery. It marks it looking. Callers
// hold m.mu.
func (m *Manager) collapseDue(key types.NamespacedName, now time.Time) bool {
	j := m.judges[key]
	if j == nil || j.looking || now.Sub(j.lookedAt) < collapseEvery || len(m.parked[key]) == 0 {
		return false
	}
	j.looking, j.lookedAt = true, now
	return true
}

// collapseParked forgets the changes kept for suspended target key (collapseDue said so)
// that would change nothing in Git: of an object the cluster no longer has whose delete is
// not mirrored (its plan writes nothing once it is gone), or whose document the folder's
// index lacked when the target stopped, the index being sound. It reads the cluster
// without m.mu (the Resolver's locks are the watcher's) and forgets only what did not
// change meanwhile; a delete's line leaves the journal with it.
func (m *Manager) collapseParked(key types.NamespacedName) {
	m.mu.Lock()
	j, p := m.judges[key], m.parked[key]
	if j == nil || p == nil {
		m.mu.Unlock()
		return
	}
	mark := m.journal.mark() // under m.mu, as Submit records: a line since is another change's
	ticks := make(map[ObjectKey]uint64, len(p))
	removes := make(map[ObjectKey]bool, len(p))
	for k, c := range p {
		ticks[k], removes[k] = j.touched[k], c.Deleted || c.Pruned // whatever the prune mode is when it comes back
	}
	m.mu.Unlock()
	for k := range ticks {
		if (removes[k] && !j.absent(k)) || held(m.opts.Resolver, key, k) {
			delete(ticks, k)
		} else if obj, err := m.opts.Resolver.Current(key, k); err != nil || obj != nil {
			delete(ticks, k) // there again, or its cache cannot tell: its registration decides
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j.looking = false
	if m.judges[key] != j || m.parked[key] == nil {
		return // it came back, or went, meanwhile
	}
	var dropped, journaled []ObjectKey
	for k, tick := range ticks {
		if c, kept := p[k]; kept && j.touched[k] == tick {
			delete(p, k)
			delete(j.touched, k)
			dropped = append(dropped, k)
			if c.Deleted { // its line, not one of the object's another change owns
				journaled = append(journaled, k)
			}
		}
	}
	m.journal.writtenUpTo(key, journaled, mark)
	if len(dropped) > 0 {
		m.opts.Log.Info("forgot changes of gone objects that change nothing in Git while the target is suspended", "gitTarget", key.String(), "objects", len(dropped))
	}
}
