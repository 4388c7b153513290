package watcher

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// goneMemory is how long an informer keeps the deletes its handler had while its resource
// is watched at another version too (informer.gone). A rule that moves to its version
// leaves the other version's handler, which may lag behind by a slow event (a namespace's
// labels asked of the API server) and then judges that delete by claims that are no longer
// the rule's; this handler had it before the rule came, so it reached neither for the
// rule's target. The hand-over (joinedLocked) finds it here.
const goneMemory = 2 * time.Minute

// goneRecord is one delete an informer's handler had: the object, and when.
type goneRecord struct {
	key string
	obj interface{}
	at  time.Time
	seq uint64
}

// recentlyGone is the deletes an informer's handler had within goneMemory, oldest first,
// and the last of each key.
type recentlyGone struct {
	order []goneRecord
	byKey map[string]goneRecord
	seq   uint64
}

// add records the delete of key, forgetting those older than goneMemory.
func (g *recentlyGone) add(key string, obj interface{}, now time.Time) {
	for len(g.order) > 0 && now.Sub(g.order[0].at) > goneMemory {
		old := g.order[0]
		g.order = g.order[1:]
		if g.byKey[old.key].seq == old.seq {
			delete(g.byKey, old.key)
		}
	}
	if g.byKey == nil {
		g.byKey = map[string]goneRecord{}
	}
	g.seq++
	r := goneRecord{key: key, obj: obj, at: now, seq: g.seq}
	g.order = append(g.order, r)
	g.byKey[key] = r
}

// handledDelete drops key from what i's handler has had and, while i records (its resource
// is watched at another version too), remembers the delete. Callers hold w.mu (a read at
// least): the handler reads its claims in the same hold.
func (i *informer) handledDelete(key string, obj interface{}, now time.Time) {
	i.handledMu.Lock()
	defer i.handledMu.Unlock()
	delete(i.handledObjs, key)
	if i.recording {
		i.gone.add(key, obj, now)
	}
}

// record starts or stops remembering deletes (informer.gone); stopping forgets them.
// Callers hold w.mu for writing.
func (i *informer) record(on bool) {
	i.handledMu.Lock()
	defer i.handledMu.Unlock()
	if !on {
		i.gone = recentlyGone{}
	}
	i.recording = on
}

// goneOf is the objects of left (by key, with the UID the other informer knew them by)
// whose delete i's handler had within goneMemory before now, of that object (not one of
// the name deleted before it was created again), and that it does not know again since.
// Callers hold w.mu for writing.
func (i *informer) goneOf(left map[string]types.UID, now time.Time) []interface{} {
	known := map[string]bool{}
	for _, o := range i.known() {
		if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			known[key] = true
		}
	}
	i.handledMu.Lock()
	defer i.handledMu.Unlock()
	var objs []interface{}
	for key, uid := range left {
		r, ok := i.gone.byKey[key]
		if !ok || known[key] || now.Sub(r.at) > goneMemory {
			continue
		}
		if u, ok := deletedObject(r.obj); ok && (uid == "" || u.GetUID() == "" || u.GetUID() == uid) {
			objs = append(objs, r.obj)
		}
	}
	return objs
}

// recordLocked has each informer remember its handler's deletes while its resource is
// watched at another version too, the only time a rule can move to it from another
// informer (joinedLocked). Callers hold w.mu for writing.
func (w *Watcher) recordLocked() {
	versions := map[schema.GroupResource]int{}
	for gvr := range w.informers {
		versions[gvr.GroupResource()]++
	}
	for gvr, inf := range w.informers {
		inf.record(versions[gvr.GroupResource()] > 1)
	}
}

// joined is the deletes handed to the claims that joined an informer of gvr already
// running (joinedLocked).
type joined struct {
	gvr    schema.GroupVersionResource
	claims []Claim
	objs   []interface{}
}

// joinedLocked is, for each informer already running that a rule's claims join from
// another version of its resource (its CRD's served version changed, and the rule moved,
// from old to now, to a version another rule watches), the deletes that reached neither
// informer for them: objects the other version's informer knew when they left (stopped:
// what it handed over) whose delete this informer's handler had before they came. Its own
// later deletes reach them, and those the other handler had before they left did. Callers
// hold w.mu for writing, before new informers start.
func (w *Watcher) joinedLocked(old, now []Claim, stopped map[schema.GroupResource][]interface{}) []joined {
	var out []joined
	for gvr, inf := range w.informers {
		claims := joiningClaims(old, now, gvr)
		if len(claims) == 0 || !inf.inf.HasSynced() {
			continue
		}
		left := map[string]types.UID{}
		add := func(objs []interface{}) {
			for _, o := range objs {
				if u, ok := deletedObject(o); ok {
					if key, err := cache.MetaNamespaceKeyFunc(u); err == nil {
						left[key] = u.GetUID()
					}
				}
			}
		}
		add(stopped[gvr.GroupResource()])
		for other, o := range w.informers {
			if other != gvr && other.GroupResource() == gvr.GroupResource() && o.inf.HasSynced() {
				add(o.known())
			}
		}
		if objs := inf.goneOf(left, time.Now()); len(objs) > 0 {
			out = append(out, joined{gvr: gvr, claims: claims, objs: objs})
		}
	}
	return out
}

// handJoined fans each hand-over's deletes out to the claims that joined. Outside w.mu:
// judging a delete may ask the API server for a namespace's labels.
func (w *Watcher) handJoined(joins []joined) {
	for _, j := range joins {
		for _, o := range j.objs {
			if u, ok := deletedObject(o); ok {
				w.deleted(j.gvr, j.claims, u)
			}
		}
	}
}

// joiningClaims is a rule's claims at gvr in now that old lacks, when old claimed gvr's
// resource at another version: the rule moved to gvr. Pure.
func joiningClaims(old, now []Claim, gvr schema.GroupVersionResource) []Claim {
	had := map[string]bool{}
	moved := false
	for _, c := range old {
		had[c.key()] = true
		moved = moved || (c.Resource.GVR != gvr && c.Resource.GVR.GroupResource() == gvr.GroupResource())
	}
	if !moved {
		return nil
	}
	var out []Claim
	for _, c := range now {
		if c.Resource.GVR == gvr && !had[c.key()] {
			out = append(out, c)
		}
	}
	return out
}
