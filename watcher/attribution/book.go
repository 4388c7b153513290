// Package attribution joins a stored change to the user the API server authenticated for
// it. The admission webhook records each admitted, non-dry-run write; the watcher looks the
// stored change up when its event arrives. The join is exact or nothing: an event that
// matches no record is reported as unattributed and falls back to the committer identity,
// never to a guess.
//
// Keys (architecture §4): a create joins on the object's UID, which the API server assigns
// before validating admission, when the object seen has the content admitted (its digest;
// the API server changes nothing after validating admission); an update on UID + the
// resourceVersion the request replaced + a digest of the sanitized new object (so an
// admitted request that later failed in storage cannot claim another request's write); a
// delete on UID.
package attribution

import (
	"container/list"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Author is the identity the API server authenticated for a request. Only the username is
// kept: it is all a commit needs, and it keeps a record small whatever the request carried.
type Author struct {
	Username string `json:"username"`
	// RecordedAt is when the leader's Book recorded the request, set on a joined Author
	// only (a record keeps it apart, and it never crosses the wire): how far the watch runs
	// behind the API server is the time from it to the event (Metrics.Lagged).
	RecordedAt time.Time `json:"-"`
}

// MaxUsernameBytes bounds a recorded username; a longer one is not recorded (its change is
// committed under the committer). Real usernames (e-mail addresses, OIDC subjects, service
// accounts) are far shorter.
const MaxUsernameBytes = 256

// MaxKeyFieldBytes bounds the strings of a recorded key (the object's uid, the version an
// update replaced, a create's apiVersion); a longer one is not recorded. Real ones are far
// shorter (a uid is 36 bytes, an apiVersion at most 317), and only someone posting reviews
// to the webhook besides the API server sends more: with a body of megabytes, an hour of
// such records would exhaust the replica's memory, the count bounding them but not their
// size.
const MaxKeyFieldBytes = 512

// Op is the kind of write a record describes.
type Op string

// Ops recorded by the webhook.
const (
	Create Op = "CREATE"
	Update Op = "UPDATE"
	Delete Op = "DELETE"
	// Scale is an update through the scale subresource (kubectl scale): its admission
	// request holds a Scale, not the object, so what it left has no digest to join by. It is
	// joined only to an update that changed spec.replicas alone (ScaledOnly).
	Scale Op = "SCALE"
)

// Key identifies one stored change, computable both at admission and from a watch event.
type Key struct {
	Op  Op        `json:"op"`
	UID types.UID `json:"uid"`
	// OldResourceVersion is the version an update replaced; empty for creates and deletes.
	OldResourceVersion string `json:"oldResourceVersion,omitempty"`
	// Digest is the sanitized new object's digest for creates and updates; zero for
	// deletes. A create's is not part of its join key (see slot).
	Digest Digest `json:"digest"`
	// APIVersion is a create's object's apiVersion, in which Digest was taken: a create
	// requested in another version than the watch's is joined by UID alone. Not part of
	// the join key either.
	APIVersion string `json:"apiVersion,omitempty"`
	// Replicas is what a write through the scale subresource set spec.replicas to (0 when
	// absent, as a Scale omits it then): part of a Scale's join key.
	Replicas int64 `json:"replicas,omitempty"`
	// First marks a delete of an object whose deletion had not begun: an earlier delete
	// record of its UID older than refusedDeleteAge is of a delete that never took effect
	// (another admission step refused it), so this one replaces it instead of making the
	// key ambiguous. Not part of the join key.
	First bool `json:"first,omitempty"`
	// Neutral marks an update that left the sanitized object as it was (a controller writing
	// status through the main resource, an annotation Git does not hold): it made none of
	// the content it left, so a re-list that first shows that content is never joined to
	// it (JoinCreated) but to the update that made it. Not part of the join key.
	Neutral bool `json:"neutral,omitempty"`
}

// CreateKey is the join key of a create.
func CreateKey(uid types.UID) Key { return Key{Op: Create, UID: uid} }

// slot is where the Book files a record of k: a create's by UID alone, its digest kept in
// the record to compare with the object seen (JoinCreated).
func (k Key) slot() Key {
	if k.Op == Create {
		k.Digest, k.APIVersion = Digest{}, ""
	}
	k.First, k.Neutral = false, false
	return k
}

// UpdateKey is the join key of an update.
func UpdateKey(uid types.UID, oldRV string, d Digest) Key {
	return Key{Op: Update, UID: uid, OldResourceVersion: oldRV, Digest: d}
}

// ScaleKey is the join key of an update through the scale subresource of the object uid,
// from its version oldRV, to replicas.
func ScaleKey(uid types.UID, oldRV string, replicas int64) Key {
	return Key{Op: Scale, UID: uid, OldResourceVersion: oldRV, Replicas: replicas}
}

// DeleteKey is the join key of a delete.
func DeleteKey(uid types.UID) Key { return Key{Op: Delete, UID: uid} }

// oversized says a string of k is longer than MaxKeyFieldBytes.
func (k Key) oversized() bool {
	return len(k.UID) > MaxKeyFieldBytes || len(k.OldResourceVersion) > MaxKeyFieldBytes || len(k.APIVersion) > MaxKeyFieldBytes
}

// Defaults bound a Book: records live long enough for a lagging watch, and a flood of
// writes the watcher never sees (unwatched fields, failed requests) cannot grow it without
// limit.
const (
	DefaultTTL        = 5 * time.Minute
	DefaultMaxRecords = 100_000
	// DefaultDeleteTTL is how long a delete's record is kept (at least the Book's ttl): the
	// delete may wait that long for finalizers (a namespace emptying, a volume's protection
	// until its pods are gone) before the watcher sees it. It is joined only around when it
	// was asked for (JoinRequestedAt) or within moments (JoinWithin), so keeping it longer
	// lends it to no other change.
	DefaultDeleteTTL = time.Hour
)

type record struct {
	key      Key
	author   Author
	recorded time.Time
	expires  time.Time
	// listed holds the targets a list carried the create's author to (CreatedBy): later
	// lists for them do not.
	listed map[types.NamespacedName]bool
}

// Book holds recent admission records. It is safe for concurrent use: every webhook
// request writes and every watch event reads.
type Book struct {
	ttl       time.Duration
	deleteTTL time.Duration
	max       int
	now       func() time.Time

	mu    sync.Mutex
	byKey map[Key]*list.Element
	// byResult finds an update's record by the object it left (UID and digest): for an
	// object first seen after a create and an update in one relist gap (JoinCreated).
	byResult map[result]*list.Element
	// updated counts the update records of each UID held that changed its content: a create
	// that cannot be compared with the object seen is not joined by UID alone after such an
	// update, whose content it may show (JoinCreated).
	updated map[types.UID]int
	order   *list.List // oldest first, deletes aside
	deletes *list.List // deletes' records, oldest first: they expire later
}

// result is the object an update left: its UID and the digest of its sanitized form.
type result struct {
	uid    types.UID
	digest Digest
}

// NewBook returns a Book keeping records for ttl (deletes' for DefaultDeleteTTL, or ttl when
// longer), at most maxRecords of them (the oldest go first). Zero values take the defaults.
func NewBook(ttl time.Duration, maxRecords int) *Book {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if maxRecords <= 0 {
		maxRecords = DefaultMaxRecords
	}
	return &Book{ttl: ttl, deleteTTL: max(ttl, DefaultDeleteTTL), max: maxRecords, now: time.Now,
		byKey: map[Key]*list.Element{}, byResult: map[result]*list.Element{}, updated: map[types.UID]int{},
		order: list.New(), deletes: list.New()}
}

// refusedDeleteAge is how old a delete's record must be for a first delete of the same
// object (Key.First) to replace it: by then the earlier delete would have begun the
// object's deletion, had it been stored. Two deletes within it both see the object alive,
// and either may be the one stored: ambiguous. The watcher joins an immediate delete
// within the same time.
const refusedDeleteAge = 30 * time.Second

// Record remembers who asked for a write. Two records for one key by different users make
// it ambiguous (two requests for the same change, or someone posting reviews to the webhook
// besides the API server): the change is then left unattributed, never given to either. A
// delete marked First replaces a record of its key older than refusedDeleteAge instead.
func (b *Book) Record(k Key, a Author) {
	if a.Username == "" || len(a.Username) > MaxUsernameBytes || k.oversized() {
		return
	}
	a.RecordedAt = time.Time{} // compared by who, not when; a join sets it
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.expireLocked(now)
	if e, ok := b.byKey[k.slot()]; ok {
		r := e.Value.(*record)
		refused := k.Op == Delete && k.First && now.Sub(r.recorded) > refusedDeleteAge
		if r.author != a && !refused {
			a = Author{} // ambiguous: joins as unattributed
		}
		b.removeLocked(e)
	}
	var e *list.Element
	if k.Op == Delete {
		e = b.deletes.PushBack(&record{key: k, author: a, recorded: now, expires: now.Add(b.deleteTTL)})
	} else {
		e = b.order.PushBack(&record{key: k, author: a, recorded: now, expires: now.Add(b.ttl)})
	}
	b.byKey[k.slot()] = e
	if k.Op == Update && !k.Neutral {
		b.byResult[result{k.UID, k.Digest}] = e // the newest update making that content
	}
	if k.Op == Update && !k.Neutral {
		b.updated[k.UID]++
	}
	for b.order.Len()+b.deletes.Len() > b.max {
		b.removeLocked(b.oldestLocked())
	}
}

// oldestLocked is the oldest record of a full Book.
func (b *Book) oldestLocked() *list.Element {
	first, del := b.order.Front(), b.deletes.Front()
	if first == nil || (del != nil && del.Value.(*record).recorded.Before(first.Value.(*record).recorded)) {
		return del
	}
	return first
}

// Join returns the author of the stored change k and forgets the record: a record
// attributes at most one change.
func (b *Book) Join(k Key) (Author, bool) { return b.JoinWithin(k, 0) }

// JoinWithin is Join for a change that cannot have been requested more than within ago
// (0: any live record): an older record for its key is forgotten, not joined. A delete
// keyed by UID alone is the case: an admitted delete another admission step then refused
// leaves a record that a later delete of the object, by someone whose request was not
// recorded, would otherwise join.
func (b *Book) JoinWithin(k Key, within time.Duration) (Author, bool) {
	a, ok, _ := b.JoinWithinFound(k, within)
	return a, ok
}

// JoinWithinFound is JoinWithin that also says whether k had a record at all (found), one
// too old or ambiguous included: only a change without one may be joined another way.
func (b *Book) JoinWithinFound(k Key, within time.Duration) (a Author, ok, found bool) {
	return b.joinIf(k, func(recorded, now time.Time) bool { return within <= 0 || now.Sub(recorded) <= within })
}

// JoinRequestedAt is Join for a change requested at about at (less tolerance, for the
// clocks of the API server and this process): a delete that waited for finalizers or a
// grace period, whose deletionTimestamp says when it was asked for, comes minutes later. A
// record made before (an admitted delete another admission step refused, then a delete
// nobody recorded) is forgotten, not joined; one made after is the delete asked for again
// (admission sees each repeat of a delete that waits), by its author or, when another
// repeated it, ambiguous (Record). But only while the record of the delete asked for could
// still be there to tell: one made more than a delete's TTL after at (less tolerance, the
// record asked for may have been made that much early) follows a record that may have
// expired, and may be someone else's repeat, which would otherwise have made it ambiguous.
// A repeat by the same author that late is not joined either: the committer's.
func (b *Book) JoinRequestedAt(k Key, at time.Time, tolerance time.Duration) (Author, bool) {
	a, ok, _ := b.joinIf(k, func(recorded, _ time.Time) bool {
		return !recorded.Before(at.Add(-tolerance)) && !recorded.After(at.Add(b.deleteTTL-tolerance))
	})
	return a, ok
}

// joinIf joins k's record, which it forgets, when ok says its time fits.
func (b *Book) joinIf(k Key, ok func(recorded, now time.Time) bool) (a Author, joined, found bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.expireLocked(now)
	e, found := b.byKey[k.slot()]
	if !found {
		return Author{}, false, false
	}
	b.removeLocked(e)
	r := e.Value.(*record)
	if !ok(r.recorded, now) {
		return Author{}, false, true
	}
	return r.joined(), r.author.Username != "", true
}

// joined is the record's author as a join returns it, with when it was recorded.
func (r *record) joined() Author {
	a := r.author
	a.RecordedAt = r.recorded
	return a
}

// JoinCreated is Join for an object seen for the first time (a watch's add): seen, its
// key from KeyForEvent, in state resourceVersion rv. The create's record is joined when the
// object is as it was created. After a re-list whose gap covered the create and a later
// update, it is not: the record of an update that left exactly the content seen (and did
// not replace rv, as an update made after the add would) is joined instead, and nothing
// when no record left that content (an update nobody recorded). The create's record is
// forgotten either way. One whose content cannot be compared joins by UID alone, as
// before digests: requested in another API version than the watch's, or recorded by a
// replica of an earlier release; but not once an update that changed the object was
// recorded, whose content the object seen may hold.
func (b *Book) JoinCreated(seen Key, rv string) (Author, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked(b.now())
	var e *list.Element
	created := b.byKey[CreateKey(seen.UID)]
	update, updated := b.byResult[result{seen.UID, seen.Digest}]
	switch {
	case created != nil && sameCreate(created.Value.(*record).key, seen, false):
		e = created
	case updated && update.Value.(*record).key.OldResourceVersion != rv:
		e = update
	case created != nil && b.updated[seen.UID] == 0 && sameCreate(created.Value.(*record).key, seen, true):
		e = created // cannot be compared: by UID alone, unless someone updated it since
	}
	if created != nil {
		b.removeLocked(created)
	}
	if e == nil {
		return Author{}, false
	}
	if e != created {
		b.removeLocked(e)
	}
	r := e.Value.(*record)
	return r.joined(), r.author.Username != ""
}

// sameCreate says whether the object seen (its create key from a watch or a list) is as
// the recorded create left it. When their contents cannot be compared (another API
// version, or no digest recorded), loose decides.
func sameCreate(recorded, seen Key, loose bool) bool {
	if recorded.Digest == (Digest{}) || recorded.APIVersion != seen.APIVersion {
		return loose
	}
	return recorded.Digest == seen.Digest
}

// CreatedBy is the author of the create record of uid, when target's list shows the object
// exactly as that create left it (seen gives its create key, computed only when there is a
// record): an object created just before its rule's informer listed it comes to the writer
// by the list, not by an add event. Only the first list for each target gets it (later
// ones, a rule edited, a re-list, are no one's change). The record stays, for the add event
// that may still follow (its notification can trail the cache), and expires.
func (b *Book) CreatedBy(uid types.UID, target types.NamespacedName, seen func() (Key, bool)) (Author, bool) {
	b.mu.Lock()
	e, ok := b.byKey[CreateKey(uid)]
	var r record
	listed := false
	if ok {
		r = *e.Value.(*record)
		listed = r.listed[target] // the map is shared with the record: read under the lock
	}
	b.mu.Unlock()
	if !ok || listed || r.author.Username == "" || !b.now().Before(r.expires) {
		return Author{}, false
	}
	k, ok := seen()
	if !ok || !sameCreate(r.key, k, false) {
		return Author{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, still := b.byKey[CreateKey(uid)]
	if !still || cur != e || cur.Value.(*record).listed[target] {
		return Author{}, false
	}
	if cur.Value.(*record).listed == nil {
		cur.Value.(*record).listed = map[types.NamespacedName]bool{}
	}
	cur.Value.(*record).listed[target] = true
	return r.author, true
}

// Len is the number of live records.
func (b *Book) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked(b.now())
	return b.order.Len() + b.deletes.Len()
}

func (b *Book) expireLocked(now time.Time) {
	for _, l := range []*list.List{b.order, b.deletes} {
		for e := l.Front(); e != nil && !now.Before(e.Value.(*record).expires); e = l.Front() {
			b.removeLocked(e)
		}
	}
}

func (b *Book) removeLocked(e *list.Element) {
	k := e.Value.(*record).key
	delete(b.byKey, k.slot())
	if res := (result{k.UID, k.Digest}); k.Op == Update && b.byResult[res] == e {
		delete(b.byResult, res)
	}
	if k.Op == Update && !k.Neutral {
		if b.updated[k.UID]--; b.updated[k.UID] <= 0 {
			delete(b.updated, k.UID)
		}
	}
	b.order.Remove(e) // a no-op for an element of the other list
	b.deletes.Remove(e)
}
