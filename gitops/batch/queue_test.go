package batch

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// anUpdate is the intent of a change that an update made, and seenDelete that of a delete
// its rule mirrors.
var (
	anUpdate   = intent{}
	seenDelete = intent{deleted: true}
)

func qkey(name string) ObjectKey {
	return ObjectKey{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "team-a", Name: name}
}

func authors(wins []*authorWindow) []string {
	out := []string{}
	for _, w := range wins {
		out = append(out, w.author)
	}
	return out
}

// dirtyOf takes every window of q as due well after now and returns what they hold.
func dirtyOf(q *queue, cfg WindowConfig, now time.Time) map[ObjectKey]intent {
	wins, _ := q.due(cfg, now.Add(time.Hour))
	out := map[ObjectKey]intent{}
	for _, w := range wins {
		for k, in := range w.dirty {
			out[k] = in
		}
	}
	return out
}

func TestQueueWindowsPerAuthor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := WindowConfig{Quiet: 5 * time.Second, MaxDelay: 30 * time.Second}

	t.Run("a window is as old as its oldest object, not one that moved to another author's", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("b"), anUpdate, "alice", t0.Add(25*time.Second))
		q.add(qkey("a"), anUpdate, "bob", t0.Add(26*time.Second))
		assert.Equal(t, t0.Add(25*time.Second), q.windows["alice"].First)
		assert.Equal(t, t0, q.windows["bob"].First, "a brings its age along")
		wins, _ := q.due(WindowConfig{Quiet: 10 * time.Second, MaxDelay: 30 * time.Second}, t0.Add(31*time.Second))
		assert.Equal(t, []string{"bob"}, authors(wins), "her window waits for her quiet period, not a's maxDelay")
	})
	t.Run("interleaved authors keep separate windows", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("b"), anUpdate, "bob", t0.Add(time.Second))
		q.add(qkey("c"), anUpdate, "alice", t0.Add(2*time.Second))
		wins, _ := q.due(cfg, t0.Add(10*time.Second))
		require.Equal(t, []string{"alice", "bob"}, authors(wins))
		assert.Len(t, wins[0].dirty, 2)
		assert.Len(t, wins[1].dirty, 1)
		assert.Equal(t, 0, q.pending())
	})
	t.Run("an object belongs to the window of whoever changed it last", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("a"), anUpdate, "bob", t0.Add(time.Second))
		wins, _ := q.due(cfg, t0.Add(10*time.Second))
		require.Equal(t, []string{"bob"}, authors(wins))
	})
	t.Run("an object two authors keep changing in turn still commits once its first change is maxDelay old", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("b"), anUpdate, "bob", t0.Add(-time.Minute)) // bob's other object: his window is older
		wins, _ := q.due(cfg, t0)
		require.Equal(t, []string{"bob"}, authors(wins))
		var due []*authorWindow
		for i := 0; len(due) == 0 && i < 20; i++ {
			at := t0.Add(time.Duration(i) * 4 * time.Second) // within quiet of each other
			q.add(qkey("a"), anUpdate, []string{"alice", "bob"}[i%2], at)
			due, _ = q.due(cfg, at)
			require.True(t, len(due) > 0 || at.Before(t0.Add(cfg.MaxDelay)), "nothing due at %s", at.Sub(t0))
		}
		require.Len(t, due, 1)
		assert.Contains(t, due[0].dirty, qkey("a"))
		assert.Equal(t, t0, due[0].First, "the window is as old as the object's first change")
		assert.Empty(t, q.since, "nothing waits")
	})
	t.Run("a window its author asked to commit closes once her changes are quiet for askedQuiet, not its quiet", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.request(&CommitRequest{Author: "alice", Message: "release"}, t0)
		wins, wait := q.due(cfg, t0.Add(askedQuiet/5))
		assert.Empty(t, wins, "a change of another resource may still be on its way")
		assert.Equal(t, askedQuiet-askedQuiet/5, wait)
		q.add(qkey("b"), anUpdate, "alice", t0.Add(askedQuiet/2)) // and it comes
		wins, _ = q.due(cfg, t0.Add(askedQuiet))
		assert.Empty(t, wins)
		wins, _ = q.due(cfg, t0.Add(askedQuiet/2+askedQuiet))
		require.Equal(t, []string{"alice"}, authors(wins))
		assert.Len(t, wins[0].dirty, 2, "one commit carries both with the message")
		assert.Len(t, wins[0].requests, 1)
	})
	t.Run("a window its author asked to commit waits askedQuiet after the request too: a slower watch's change may follow it", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.request(&CommitRequest{Author: "alice", Message: "release"}, t0.Add(time.Second))
		wins, _ := q.due(cfg, t0.Add(time.Second))
		assert.Empty(t, wins)
		q.add(qkey("b"), anUpdate, "alice", t0.Add(time.Second+askedQuiet/2)) // the slower watch's
		wins, _ = q.due(cfg, t0.Add(time.Second+askedQuiet))
		assert.Empty(t, wins)
		wins, _ = q.due(cfg, t0.Add(time.Second+askedQuiet/2+askedQuiet))
		require.Equal(t, []string{"alice"}, authors(wins))
		assert.Len(t, wins[0].dirty, 2, "one commit carries both with the message")
	})
	t.Run("a window whose only request is withdrawn keeps its quiet", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		typo := &CommitRequest{Author: "alice", Message: "relaese"}
		q.request(typo, t0)
		q.withdraw(typo) // deleted
		wins, wait := q.due(cfg, t0.Add(askedQuiet))
		assert.Empty(t, wins)
		assert.Equal(t, cfg.Quiet-askedQuiet, wait)
	})
	t.Run("a window its author asked to commit closes askedWait after the request though her changes keep coming", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.request(&CommitRequest{Author: "alice", Message: "release"}, t0)
		step := askedQuiet * 4 / 5
		var wins []*authorWindow
		at := t0
		for ; len(wins) == 0 && at.Before(t0.Add(time.Minute)); at = at.Add(step) {
			q.add(qkey("a"), anUpdate, "alice", at) // a controller's account, say, every step
			wins, _ = q.due(WindowConfig{Quiet: time.Hour}, at)
		}
		require.Equal(t, []string{"alice"}, authors(wins))
		closed := at.Add(-step)
		assert.False(t, closed.Before(t0.Add(askedWait)), "not before askedWait: her changes kept coming")
		assert.False(t, closed.After(t0.Add(askedWait+step)), "closed by askedWait, not a maxDelay it does not have")
	})
	t.Run("a window its author asked to commit with a quiet shorter than askedQuiet closes on its quiet", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.request(&CommitRequest{Author: "alice", Message: "release"}, t0)
		wins, _ := q.due(WindowConfig{Quiet: askedQuiet / 10, MaxDelay: time.Minute}, t0.Add(askedQuiet/10))
		require.Equal(t, []string{"alice"}, authors(wins))
	})
	t.Run("a delete already seen stays a delete when a snapshot lists the object again", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), seenDelete, "alice", t0) // alice deleted it, through a rule that mirrors deletes
		q.add(qkey("a"), intent{}, "", t0)        // a snapshot listed before the delete, through one that does not
		q.add(qkey("b"), intent{}, "alice", t0)   // nothing allowed it for b
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {deleted: true}, qkey("b"): {}}, dirtyOf(q, cfg, t0))
	})
	t.Run("a prune removes the document only while the target prunes Always, a delete seen whatever the mode", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.relist(qkey("a"), intent{pruned: true}, t0) // a list under Always finds it gone
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {pruned: true}}, dirtyOf(q, cfg, t0))
		assert.True(t, intent{pruned: true}.removes(PruneAlways))
		assert.False(t, intent{pruned: true}.removes(PruneOnEvent), "only while the target still prunes Always")
		assert.True(t, intent{deleted: true}.removes(PruneOnEvent), "a delete seen is one whatever the mode")
		assert.False(t, anUpdate.removes(PruneAlways), "an update removes nothing, whatever its rule mirrored then")
	})
	t.Run("a snapshot leaves an object waiting in its author's window, with the CommitRequest on it", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		r := &CommitRequest{Author: "alice", Message: "rotate the app's settings"}
		q.request(r, t0)
		q.relist(qkey("a"), intent{}, t0.Add(time.Second)) // a WatchRule of the target changed: its resync lists a
		q.relist(qkey("b"), intent{}, t0.Add(time.Second)) // and b, which nobody changed
		wins, _ := q.due(cfg, t0.Add(time.Hour))
		require.Equal(t, []string{"alice", ""}, authors(wins))
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {}}, wins[0].dirty, "alice's change stays hers, by the rules as they are now")
		assert.Equal(t, []*CommitRequest{r}, wins[0].requests, "and commits with her message")
		assert.Equal(t, t0, wins[0].Last, "a list is not a change: it does not hold her window open")
		assert.Equal(t, map[ObjectKey]intent{qkey("b"): {}}, wins[1].dirty, "what nobody waits on is the committer's")
	})
	t.Run("a snapshot during the commit of an author's window waits with that author, and a failed push keeps it there", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		r := &CommitRequest{Author: "alice", Message: "rotate the app's settings"}
		q.request(r, t0)
		committing, _ := q.due(cfg, t0.Add(time.Hour))
		q.flushing = committing
		committing[0].messageMade = true // its commit is made: a request now waits for her next change
		waiting := &CommitRequest{Author: "alice", Message: "for her next change"}
		q.request(waiting, t0)
		q.relist(qkey("a"), intent{}, t0.Add(time.Hour)) // a WatchRule edited meanwhile
		assert.Equal(t, []*CommitRequest{waiting}, q.waiting["alice"], "a list is not her next change")
		q.flushing = nil
		q.retry(committing[0], t0.Add(time.Hour)) // the push failed
		wins, _ := q.due(cfg, t0.Add(2*time.Hour))
		require.Equal(t, []string{"alice"}, authors(wins), "not the committer's")
		assert.Contains(t, wins[0].requests, r, "her request still commits with it")
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {}}, wins[0].dirty)
	})
	t.Run("a list's change of an object whose author's window was pushed meanwhile is the committer's", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.flushing, _ = q.due(cfg, t0.Add(time.Hour))
		q.relist(qkey("a"), intent{}, t0.Add(time.Hour)) // someone the webhook did not see changed it
		q.delivered(q.flushing[0], t0.Add(time.Hour))    // her push went through
		wins, _ := q.due(cfg, t0.Add(2*time.Hour))
		require.Equal(t, []string{""}, authors(wins), "not hers: her change is in Git")
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {}}, wins[0].dirty)
	})
	t.Run("a window a list opened for an author is not the change their next CommitRequest waits for", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.flushing, _ = q.due(cfg, t0.Add(time.Hour))
		q.relist(qkey("a"), intent{}, t0.Add(time.Hour))
		q.flushing = nil // her push went through
		next := &CommitRequest{Author: "alice", Message: "for her next change"}
		q.request(next, t0)
		assert.Equal(t, []*CommitRequest{next}, q.waiting["alice"], "it waits for her change")
		q.add(qkey("b"), anUpdate, "alice", t0.Add(2*time.Hour))
		assert.Contains(t, q.windows["alice"].requests, next, "which takes it")
	})
	t.Run("a window a list opened holds the author's change again once her failed push puts it back", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		committing, _ := q.due(cfg, t0.Add(time.Hour))
		q.flushing = committing
		q.relist(qkey("a"), intent{}, t0.Add(time.Hour))
		q.flushing = nil
		q.retry(committing[0], t0.Add(time.Hour)) // the push failed: her change is pending again
		next := &CommitRequest{Author: "alice", Message: "for the change waiting to be pushed"}
		q.request(next, t0)
		assert.Contains(t, q.windows["alice"].requests, next, "it rides her change, not waiting for another")
	})
	t.Run("a window a list opened whose push failed is put back as only a list's", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.flushing, _ = q.due(cfg, t0.Add(time.Hour))
		q.relist(qkey("a"), intent{}, t0.Add(time.Hour))
		q.flushing = nil // her push went through
		listed, _ := q.due(cfg, t0.Add(2*time.Hour))
		require.Len(t, listed, 1)
		q.retry(listed[0], t0.Add(2*time.Hour)) // the list's push failed
		next := &CommitRequest{Author: "alice", Message: "for her next change"}
		q.request(next, t0)
		assert.Equal(t, []*CommitRequest{next}, q.waiting["alice"], "what a list brought is not her change")
	})
	t.Run("a list's change attributed to the creator leaves an object another author changed since in their window", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "bob", t0)                         // bob changed it after alice created it
		q.listedBy(qkey("a"), intent{}, "alice", t0.Add(time.Second)) // the list read alice's content
		q.listedBy(qkey("b"), intent{}, "alice", t0.Add(time.Second)) // b, which only she made
		q.add(qkey("c"), anUpdate, "", t0)                            // an unattributed write
		q.listedBy(qkey("c"), intent{}, "carol", t0.Add(time.Second)) // which the list credits to her creator
		wins, _ := q.due(cfg, t0.Add(time.Hour))
		require.Equal(t, []string{"bob", "carol", "alice"}, authors(wins), "oldest first")
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): anUpdate}, wins[0].dirty, "bob's change stays his")
		assert.Equal(t, map[ObjectKey]intent{qkey("c"): anUpdate}, wins[1].dirty)
		assert.Equal(t, map[ObjectKey]intent{qkey("b"): {}}, wins[2].dirty)
	})
	t.Run("a list's change attributed to the creator of an object another author's window is committing waits with that author", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "bob", t0)
		committing, _ := q.due(cfg, t0.Add(time.Hour))
		q.flushing = committing
		q.listedBy(qkey("a"), intent{}, "alice", t0.Add(time.Hour))
		q.flushing = nil
		q.retry(committing[0], t0.Add(time.Hour)) // bob's push failed
		wins, _ := q.due(cfg, t0.Add(2*time.Hour))
		require.Equal(t, []string{"bob"}, authors(wins), "not alice's")
	})
	t.Run("a snapshot of an object waiting in no author's window joins the committer's", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "", t0) // an unattributed write
		q.relist(qkey("a"), seenDelete, t0.Add(time.Second))
		wins, _ := q.due(cfg, t0.Add(time.Hour))
		require.Equal(t, []string{""}, authors(wins))
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): seenDelete}, wins[0].dirty)
	})
	t.Run("a change older than the window holding its object still adds what it saw", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), intent{createOnly: true}, "", t0) // a snapshot through a CREATE-only rule
		q.mergeOlder(qkey("a"), seenDelete)                // kept while the target was suspended
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {deleted: true}}, dirtyOf(q, cfg, t0))
	})
	t.Run("an object is written create-only only while every change of it was", func(t *testing.T) {
		q := newQueue()
		createOnly := intent{createOnly: true}
		q.add(qkey("a"), intent{}, "alice", t0) // alice's update, through a rule that mirrors updates
		q.add(qkey("a"), createOnly, "", t0)    // then a snapshot through one that mirrors creations only
		q.add(qkey("c"), createOnly, "", t0)
		q.add(qkey("c"), intent{}, "alice", t0)
		q.add(qkey("b"), createOnly, "", t0)
		q.add(qkey("b"), createOnly, "", t0)
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {}, qkey("b"): createOnly, qkey("c"): {}}, dirtyOf(q, cfg, t0))
	})
	t.Run("a failed window put back keeps its delete in the newer window that took the object", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), seenDelete, "alice", t0)
		failed, _ := q.due(cfg, t0.Add(10*time.Second))
		q.add(qkey("a"), intent{}, "", t0.Add(11*time.Second)) // a snapshot while alice's commit failed
		q.restore(failed[0], t0.Add(12*time.Second))
		assert.Equal(t, map[ObjectKey]intent{qkey("a"): {deleted: true}}, dirtyOf(q, cfg, t0.Add(12*time.Second)))
	})
	t.Run("one author's silence does not wait for another author's activity", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("b"), anUpdate, "bob", t0.Add(4*time.Second))
		wins, wait := q.due(cfg, t0.Add(6*time.Second))
		assert.Equal(t, []string{"alice"}, authors(wins))
		assert.Equal(t, 3*time.Second, wait)
	})
	t.Run("a CommitRequest closes its author's open window, not the others'", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("b"), anUpdate, "bob", t0)
		q.request(&CommitRequest{Author: "alice", Message: "release 1.2"}, t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		require.Equal(t, []string{"alice"}, authors(wins))
		require.Len(t, wins[0].requests, 1)
	})
	t.Run("a CommitRequest before any change waits and rides the author's next window", func(t *testing.T) {
		q := newQueue()
		q.request(&CommitRequest{Author: "alice", Message: "m", Deadline: t0.Add(time.Minute)}, t0)
		q.add(qkey("x"), anUpdate, "bob", t0)
		q.add(qkey("a"), anUpdate, "alice", t0.Add(time.Second))
		wins, _ := q.due(cfg, t0.Add(2*time.Second))
		assert.Empty(t, wins, "the window still closes on quiet, so a multi-object apply lands in one commit")
		wins, _ = q.due(cfg, t0.Add(7*time.Second))
		require.Equal(t, []string{"bob", "alice"}, authors(wins))
		assert.Empty(t, wins[0].requests)
		assert.Len(t, wins[1].requests, 1)
	})
	t.Run("a write that changes nothing the writer commits leaves the object in the window it waits in", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.note(qkey("a"), anUpdate, "deployment-controller", t0.Add(time.Second))
		assert.Equal(t, "alice", q.owner[qkey("a")])
		assert.Nil(t, q.windows["deployment-controller"])
		assert.False(t, q.windows["alice"].compared, "nothing to ask the remote about")
		wins, _ := q.due(cfg, t0.Add(5*time.Second))
		require.Len(t, wins, 1, "nor does it keep her window open longer")
	})
	t.Run("a write that changes nothing the writer commits, of an object in no window, is its author's", func(t *testing.T) {
		q := newQueue()
		q.request(&CommitRequest{Author: "bob", Deadline: t0.Add(time.Minute)}, t0)
		q.note(qkey("a"), anUpdate, "bob", t0)
		require.NotNil(t, q.windows["bob"])
		assert.Len(t, q.windows["bob"].requests, 1, "his request rides it, and learns there was nothing to commit")
	})
	t.Run("a write that changes nothing the writer commits waits with the window being committed", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(5*time.Second))
		require.Len(t, wins, 1)
		q.flushing = wins
		q.note(qkey("a"), anUpdate, "deployment-controller", t0.Add(6*time.Second))
		assert.Equal(t, "alice", q.owner[qkey("a")], "a failed push gives it back to her, not to the controller")
	})
	t.Run("a waiting CommitRequest times out at its deadline", func(t *testing.T) {
		q := newQueue()
		q.request(&CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute)}, t0)
		out, wait := q.expired(t0, true)
		assert.Empty(t, out)
		assert.Equal(t, time.Minute, wait)
		out, _ = q.expired(t0.Add(time.Minute), true)
		assert.Len(t, out, 1)
	})
	t.Run("a request that has not looked for an earlier leader's commit yet outlives its deadline until it may", func(t *testing.T) {
		q := newQueue()
		r := &CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute), lookBack: true, lookBackUntil: t0.Add(3 * time.Minute)}
		q.request(r, t0)
		out, wait := q.expired(t0.Add(time.Minute), false)
		assert.Empty(t, out, "its target has not read its branch: the earlier leader may have pushed the message")
		assert.Equal(t, 2*time.Minute, wait, "no look before its target reads its branch: nothing to wake for before the end")
		_, wait = q.expired(t0.Add(time.Minute), true)
		assert.Equal(t, lookBackRetry, wait, "once its target looks, a look that failed is tried again soon")
		out, _ = q.expired(t0.Add(3*time.Minute), true)
		assert.Equal(t, []*CommitRequest{r}, out)

		looked := &CommitRequest{Author: "bob", Deadline: t0.Add(time.Minute), lookBackUntil: t0.Add(3 * time.Minute)}
		q.request(looked, t0)
		out, _ = q.expired(t0.Add(time.Minute), true)
		assert.Equal(t, []*CommitRequest{looked}, out, "one that has looked ends at its deadline")
	})
	t.Run("a window carrying a request whose look for an earlier leader's commit failed waits for the next look", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		r := &CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute), lookBack: true, lookBackUntil: t0.Add(3 * time.Minute)}
		q.request(r, t0)
		wins, wait := q.due(cfg, t0.Add(time.Hour))
		assert.Empty(t, wins, "the earlier leader may have pushed the message: committing it now could commit it twice")
		assert.Equal(t, lookBackRetry, wait)
		r.lookBack = false // looked: not found
		wins, _ = q.due(cfg, t0.Add(time.Hour))
		assert.Equal(t, []string{"alice"}, authors(wins))
	})
	t.Run("a failed window comes back with its request, but not with objects changed since", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("b"), anUpdate, "alice", t0)
		q.request(&CommitRequest{Author: "alice"}, t0)
		wins, _ := q.due(cfg, t0.Add(askedQuiet))
		require.Len(t, wins, 1)
		q.add(qkey("b"), anUpdate, "bob", t0.Add(time.Second))
		q.restore(wins[0], t0.Add(2*time.Second))
		assert.Equal(t, "alice", q.owner[qkey("a")])
		assert.Equal(t, "bob", q.owner[qkey("b")])
		require.NotNil(t, q.windows["alice"])
		assert.Len(t, q.windows["alice"].requests, 1)
		assert.True(t, q.windows["alice"].now)
		assert.Equal(t, t0, q.windows["alice"].First, "the window keeps its age")
	})
	t.Run("a window put back after a failure keeps its age, so maxDelay still counts from its first change", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(WindowConfig{MaxDelay: 30 * time.Second}, t0.Add(31*time.Second))
		require.Len(t, wins, 1)
		q.add(qkey("b"), anUpdate, "alice", t0.Add(5*time.Minute))
		q.restore(wins[0], t0.Add(10*time.Minute))
		assert.Equal(t, t0, q.windows["alice"].First)
		again, _ := q.due(WindowConfig{Quiet: time.Hour, MaxDelay: 30 * time.Second}, t0.Add(10*time.Minute))
		assert.Len(t, again, 1, "due at once: older than maxDelay")
	})
	t.Run("a window put back after a failure is due at once, not a quiet period after the failure", func(t *testing.T) {
		q := newQueue()
		slow := WindowConfig{Quiet: 10 * time.Minute}
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(slow, t0.Add(10*time.Minute))
		require.Len(t, wins, 1)
		q.retry(wins[0], t0.Add(11*time.Minute))
		again, _ := q.due(slow, t0.Add(11*time.Minute))
		assert.Len(t, again, 1, "the worker's backoff holds it back, not its quiet period")
	})
	t.Run("a window put back into one its author opened meanwhile waits for that one's silence", func(t *testing.T) {
		q := newQueue()
		slow := WindowConfig{Quiet: 10 * time.Minute}
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(slow, t0.Add(10*time.Minute))
		require.Len(t, wins, 1)
		q.add(qkey("b"), anUpdate, "alice", t0.Add(10*time.Minute+time.Second))
		q.retry(wins[0], t0.Add(11*time.Minute))
		again, wait := q.due(slow, t0.Add(11*time.Minute))
		assert.Empty(t, again)
		assert.Equal(t, 9*time.Minute+time.Second, wait)
	})
	t.Run("a window put back after its push failed keeps its first build, also merged into a newer window of its author", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(WindowConfig{}, t0)
		require.Len(t, wins, 1)
		wins[0].builtAt = t0.Add(time.Second)
		q.restore(wins[0], t0.Add(2*time.Second))
		assert.Equal(t, t0.Add(time.Second), q.windows["alice"].builtAt, "its change-to-commit latency was recorded at its first build")

		again, _ := q.due(WindowConfig{}, t0.Add(3*time.Second))
		require.Len(t, again, 1)
		q.add(qkey("b"), anUpdate, "alice", t0.Add(4*time.Second)) // while it was committed
		q.restore(again[0], t0.Add(5*time.Second))
		assert.Equal(t, t0.Add(time.Second), q.windows["alice"].builtAt,
			"commit-to-push counts from the first build; change-to-commit is not recorded again from its first change, an outage later")

		third, _ := q.due(WindowConfig{}, t0.Add(6*time.Second))
		require.Len(t, third, 1)
		q.add(qkey("a"), anUpdate, "bob", t0.Add(7*time.Second))   // bob takes a and b
		q.add(qkey("b"), anUpdate, "bob", t0.Add(7*time.Second))   // while alice's window is committed
		q.add(qkey("c"), anUpdate, "alice", t0.Add(8*time.Second)) // and alice changes c
		q.restore(third[0], t0.Add(9*time.Second))
		assert.True(t, q.windows["alice"].builtAt.IsZero(), "none of its objects came back to alice's window: c's commit is still to record")
	})
	t.Run("a request forgotten while it is handed to the queue lends no message, and one created again under its name keeps its own", func(t *testing.T) {
		q := newQueue()
		key := types.NamespacedName{Namespace: "team-a", Name: "cr"}
		deleted := &CommitRequest{Key: key, Author: "alice", Message: "old", Deadline: t0.Add(time.Minute)}
		q.withdraw(deleted) // its object deleted between the Manager taking it and the queue getting it
		q.request(deleted, t0)
		again := &CommitRequest{Key: key, Author: "alice", Message: "new", Deadline: t0.Add(time.Minute)}
		q.request(again, t0)
		q.withdraw(deleted) // a late withdraw of the old one
		q.add(qkey("a"), anUpdate, "alice", t0)
		assert.Equal(t, []*CommitRequest{again}, q.windows["alice"].requests)
	})
	t.Run("a withdrawn request leaves no empty window behind", func(t *testing.T) {
		q := newQueue()
		key := types.NamespacedName{Namespace: "team-a", Name: "cr"}
		r := &CommitRequest{Key: key, Author: "alice", Deadline: t0.Add(time.Minute)}
		q.request(r, t0)
		q.withdraw(r)
		assert.Empty(t, q.waiting)
		out, _ := q.expired(t0.Add(time.Hour), true)
		assert.Empty(t, out)
	})
}

func TestAFailedWindowTakesTheRequestsThatCameWhileItWasCommitted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := newQueue()
	q.add(qkey("a"), anUpdate, "alice", t0)
	wins, _ := q.due(WindowConfig{}, t0)
	require.Len(t, wins, 1)
	q.request(&CommitRequest{Author: "alice", Message: "release 1.2", Deadline: t0.Add(time.Minute)}, t0)
	require.Len(t, q.waiting["alice"], 1, "no open window: it waits for a change")
	q.retry(wins[0], t0.Add(time.Second))
	require.NotNil(t, q.windows["alice"])
	assert.Len(t, q.windows["alice"].requests, 1, "alice's changes are pending again: the retry carries her message")
	assert.Empty(t, q.waiting, "nor does it time out saying no change came")
}

func TestAWindowWhoseObjectsAllWaitForTheirCache(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := WindowConfig{Quiet: time.Second}
	t.Run("is held back with a backoff of its own, while other windows commit", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("b"), anUpdate, "bob", t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		require.Equal(t, []string{"alice", "bob"}, authors(wins))
		q.deferWindow(wins[0], t0.Add(time.Second))
		again, wait := q.due(cfg, t0.Add(1500*time.Millisecond))
		assert.Empty(t, again)
		assert.Equal(t, 500*time.Millisecond, wait)
		again, _ = q.due(cfg, t0.Add(2*time.Second))
		require.Equal(t, []string{"alice"}, authors(again))
		q.deferWindow(again[0], t0.Add(2*time.Second))
		assert.Equal(t, t0.Add(4*time.Second), q.windows["alice"].notBefore, "the hold doubles")
	})
	t.Run("is not held back once its author changed something else", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		q.add(qkey("c"), anUpdate, "alice", t0.Add(1100*time.Millisecond))
		q.deferWindow(wins[0], t0.Add(1200*time.Millisecond))
		assert.True(t, q.windows["alice"].notBefore.IsZero(), "c commits after its quiet time; a is deferred again then")
	})
	t.Run("is not held back when its author's CommitRequest came while it was tried", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		q.flushing = wins
		r := &CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute)}
		q.request(r, t0) // her window is being committed, its commit not made yet: r joins it
		assert.Empty(t, q.waiting)
		q.deferWindow(wins[0], t0.Add(1200*time.Millisecond))
		cur := q.windows["alice"]
		require.NotNil(t, cur)
		assert.Contains(t, cur.requests, r)
		assert.True(t, cur.notBefore.IsZero(), "tried at once, as for a request that finds the window open: it learns what it waits for")
		again, _ := q.due(cfg, t0.Add(1300*time.Millisecond))
		assert.Equal(t, []string{"alice"}, authors(again))
	})
	t.Run("is released by its author's next change or CommitRequest", func(t *testing.T) {
		for _, next := range []string{"change", "request"} {
			q := newQueue()
			q.add(qkey("a"), anUpdate, "alice", t0)
			wins, _ := q.due(cfg, t0.Add(time.Second))
			q.deferWindow(wins[0], t0.Add(time.Second))
			require.False(t, q.windows["alice"].notBefore.IsZero())
			if next == "change" {
				q.add(qkey("c"), anUpdate, "alice", t0.Add(1500*time.Millisecond))
			} else {
				q.request(&CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute)}, t0)
			}
			assert.True(t, q.windows["alice"].notBefore.IsZero(), "a %s is not held back", next)
			if next == "change" {
				assert.Zero(t, q.windows["alice"].deferrals, "new content starts the backoff again")
			}
		}
	})
	t.Run("takes the requests that came while it was tried", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		q.request(&CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute)}, t0)
		q.deferWindow(wins[0], t0.Add(time.Second))
		assert.Len(t, q.windows["alice"].requests, 1, "alice's change is pending: no TimedOut saying none came")
		assert.Empty(t, q.waiting)
	})
}

func TestAChangeKeptForASuspendedTargetKeepsItsAuthorThroughASnapshot(t *testing.T) {
	alice := Change{Key: qkey("a"), Author: "alice"}
	listed := Change{Key: qkey("a"), Relisted: true}
	assert.Equal(t, Change{Key: qkey("a"), Author: "alice"}, alice.merge(listed), "alice's change, by the rules of the list")
	bob := Change{Key: qkey("a"), Author: "bob"}
	assert.Equal(t, bob, listed.merge(bob), "a write after the list is its writer's")
	assert.Equal(t, Change{Key: qkey("a"), Relisted: true}, listed.merge(listed))
	assert.Equal(t, Change{Key: qkey("a"), Author: "bob", CoAuthors: []string{"alice"}}, alice.merge(bob),
		"alice's change waits with bob's, as the queue credits an object leaving her window")
	assert.Equal(t, Change{Key: qkey("a"), Author: "alice", CoAuthors: []string{"bob"}},
		Change{Key: qkey("a"), Author: "bob", CoAuthors: []string{"alice"}}.merge(alice), "bob's change waits with hers; never her own co-author")
}

func TestAParkedChangeKeepsItsCredits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := newQueue()
	q.add(qkey("a"), anUpdate, "alice", t0)
	q.add(qkey("a"), anUpdate, "bob", t0)
	parked := q.changes(liveKey)
	require.Len(t, parked, 1)
	assert.Equal(t, []string{"alice"}, parked[0].CoAuthors, "the target is suspended: its changes are parked with their credits")

	next := newQueue() // its next registration, where carol changed the object meanwhile
	next.add(qkey("a"), anUpdate, "carol", t0)
	next.creditOlder(parked[0]) // the parked change, older: merged, and credited
	assert.Equal(t, []string{"alice", "bob"}, next.coAuthors[qkey("a")])
	next.creditOlder(Change{Key: qkey("a"), Relisted: true})
	next.creditOlder(Change{Key: qkey("a"), Author: "carol"})
	assert.Equal(t, []string{"alice", "bob"}, next.coAuthors[qkey("a")], "a list credits nobody, nor its window's author")

	listed := newQueue()
	listed.window("dave").listed = true // a list's change held with dave while his window was pushed
	listed.place(listed.windows["dave"], qkey("b"), anUpdate, t0)
	listed.owner[qkey("b")] = "dave"
	assert.Equal(t, []Change{{Target: liveKey, Key: qkey("b"), Relisted: true}}, listed.changes(liveKey), "no one's change, as delivered hands it on")
}

func TestARequestDeletedWhileItsWindowIsCommittedLendsItNoMessage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := newQueue()
	q.add(qkey("a"), anUpdate, "alice", t0)
	typo := &CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Author: "alice", Message: "release 1.2 (typo)"}
	q.request(typo, t0)
	wins, _ := q.due(WindowConfig{}, t0)
	require.Len(t, wins, 1)
	q.flushing = wins

	q.withdraw(typo) // kubectl replace --force while the window is being committed
	assert.Empty(t, live(wins[0].requests), "left out of the commit under way if there is still time")

	q.flushing = nil
	q.retry(wins[0], t0.Add(time.Second)) // and its push failed
	wins, _ = q.due(WindowConfig{}, t0.Add(time.Hour))
	require.Len(t, wins, 1)
	assert.Empty(t, wins[0].requests, "nor carried by the retry")
	assert.Contains(t, wins[0].dirty, qkey("a"), "the change is")
}

func TestATargetIsFailingWhileAWindowWhoseCommitFailedWaits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := newQueue()
	q.add(qkey("a"), anUpdate, "alice", t0)
	wins, _ := q.due(WindowConfig{}, t0)
	wins[0].failed = true // as flushIfDue marks it
	q.retry(wins[0], t0)
	q.add(qkey("b"), anUpdate, "bob", t0)
	assert.True(t, q.failing(), "bob's window committing does not end alice's failure")

	q.add(qkey("a"), anUpdate, "alice", t0.Add(time.Second)) // she changes it again meanwhile
	assert.True(t, q.failing(), "her newer change does not either")
	wins, _ = q.due(WindowConfig{}, t0.Add(time.Hour))
	require.Len(t, wins, 2)
	assert.False(t, q.failing(), "taken to be committed: its outcome decides")

	t.Run("the failure goes with its objects to whoever changes them next", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(WindowConfig{}, t0)
		wins[0].failed = true
		q.retry(wins[0], t0)
		q.add(qkey("a"), anUpdate, "bob", t0.Add(time.Second)) // alice's window is left empty, and dropped
		assert.NotContains(t, q.windows, "alice")
		assert.True(t, q.failing(), "bob's window carries the object whose commit failed")
	})
	t.Run("waiting for the cache is no write failure", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(WindowConfig{}, t0)
		wins[0].failed = true // failed once, then its retry found the cache not synced
		q.deferWindow(wins[0], t0)
		assert.False(t, q.failing())
	})
}

func TestARequestRemembersOnlyItsLastFailedPushes(t *testing.T) {
	r := &CommitRequest{Message: "m"}
	win := &authorWindow{requests: []*CommitRequest{r}}
	var last plumbing.Hash
	for i := range 3 * keptAttempts {
		last = plumbing.ComputeHash(plumbing.CommitObject, []byte(fmt.Sprint(i)))
		attempted(win, last)
	}
	assert.Len(t, r.attempted, keptAttempts, "an outage's retries do not grow it")
	assert.Equal(t, last, r.attempted[len(r.attempted)-1], "the newest, which a landed push would be, is kept")
}

func TestAWindowWhoseCommitTheServerDeclined(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := WindowConfig{Quiet: time.Second}
	declined := func(t *testing.T) *queue {
		t.Helper()
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		q.decline(wins[0], t0.Add(time.Second))
		again, _ := q.due(cfg, t0.Add(2*time.Second))
		require.Equal(t, []string{"alice"}, authors(again))
		q.decline(again[0], t0.Add(2*time.Second))
		require.Equal(t, t0.Add(4*time.Second), q.windows["alice"].notBefore, "the hold doubles")
		require.True(t, q.failing(), "a failed write, which status shows")
		return q
	}
	t.Run("is not released by a new object of its author: what the server refused is still in it", func(t *testing.T) {
		q := declined(t)
		q.add(qkey("c"), anUpdate, "alice", t0.Add(2500*time.Millisecond))
		assert.Equal(t, t0.Add(4*time.Second), q.windows["alice"].notBefore)
		assert.Equal(t, 2, q.windows["alice"].deferrals)
	})
	t.Run("is tried within a second when its author changes an object it holds, perhaps the fix", func(t *testing.T) {
		q := declined(t)
		q.add(qkey("a"), anUpdate, "alice", t0.Add(2500*time.Millisecond))
		assert.Equal(t, t0.Add(3500*time.Millisecond), q.windows["alice"].notBefore)
		assert.Equal(t, 2, q.windows["alice"].deferrals, "declined again, it waits longer")
	})
	t.Run("is tried quickly once per step of its backoff while an object it holds keeps changing", func(t *testing.T) {
		q := declined(t)
		q.add(qkey("a"), anUpdate, "alice", t0.Add(2500*time.Millisecond)) // tried at 3.5 s
		quick, _ := q.due(cfg, t0.Add(3500*time.Millisecond))
		require.Equal(t, []string{"alice"}, authors(quick))
		q.decline(quick[0], t0.Add(3500*time.Millisecond)) // declined again: held for 4 s
		require.Equal(t, t0.Add(7500*time.Millisecond), q.windows["alice"].notBefore)
		q.add(qkey("a"), anUpdate, "alice", t0.Add(4*time.Second))
		assert.Equal(t, t0.Add(7500*time.Millisecond), q.windows["alice"].notBefore, "the step after a quick try runs its course")
		full, _ := q.due(cfg, t0.Add(7500*time.Millisecond))
		q.decline(full[0], t0.Add(7500*time.Millisecond))
		q.add(qkey("a"), anUpdate, "alice", t0.Add(8*time.Second))
		assert.Equal(t, t0.Add(9*time.Second), q.windows["alice"].notBefore, "and the next step has its quick try again")
	})
	t.Run("is released by a CommitRequest of its author", func(t *testing.T) {
		q := declined(t)
		q.request(&CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute)}, t0)
		assert.True(t, q.windows["alice"].notBefore.IsZero())
	})
	// Changes reach the queue while a window is pushed: they open a new window of its author,
	// which the declined one joins.
	pushedWhile := func(t *testing.T, change func(q *queue)) *authorWindow {
		t.Helper()
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		q.decline(wins[0], t0.Add(time.Second)) // held until t0+2s
		wins, _ = q.due(cfg, t0.Add(2*time.Second))
		require.Equal(t, []string{"alice"}, authors(wins))
		change(q)
		q.decline(wins[0], t0.Add(3*time.Second)) // declined again: held for 2 s
		return q.windows["alice"]
	}
	t.Run("is held back though its author added an object while it was pushed", func(t *testing.T) {
		win := pushedWhile(t, func(q *queue) { q.add(qkey("c"), anUpdate, "alice", t0.Add(2500*time.Millisecond)) })
		assert.Equal(t, t0.Add(5*time.Second), win.notBefore)
		assert.True(t, win.declined)
		assert.Len(t, win.dirty, 2)
	})
	t.Run("is tried within a second when its author changed an object of it while it was pushed", func(t *testing.T) {
		win := pushedWhile(t, func(q *queue) { q.add(qkey("a"), anUpdate, "alice", t0.Add(2500*time.Millisecond)) })
		assert.Equal(t, t0.Add(4*time.Second), win.notBefore)
		assert.Equal(t, 2, win.deferrals, "declined again, it waits longer")
	})
	t.Run("holds back none of its author's new objects when all it held went to another author", func(t *testing.T) {
		win := pushedWhile(t, func(q *queue) {
			q.add(qkey("a"), anUpdate, "bob", t0.Add(2500*time.Millisecond))
			q.add(qkey("c"), anUpdate, "alice", t0.Add(2500*time.Millisecond))
		})
		assert.True(t, win.notBefore.IsZero())
		assert.False(t, win.declined)
	})
	t.Run("is held back when a request of its author stays parked", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Second))
		wins[0].listed = true // a window a relist opened, which takes no request
		q.waiting["alice"] = []*CommitRequest{{Author: "alice", Deadline: t0.Add(time.Minute)}}
		q.decline(wins[0], t0.Add(2*time.Second))
		require.Len(t, q.waiting["alice"], 1, "a window a relist opened takes no request")
		assert.False(t, q.windows["alice"].notBefore.IsZero(), "or the request would release it at every decline")
		q.add(qkey("c"), anUpdate, "alice", t0.Add(2500*time.Millisecond))
		assert.Len(t, q.windows["alice"].requests, 1, "her next change takes the request along")
		assert.True(t, q.windows["alice"].notBefore.IsZero(), "and a request that rides the window ends its hold")
	})
	t.Run("is not held back when its author asked to commit while it was pushed", func(t *testing.T) {
		win := pushedWhile(t, func(q *queue) { q.request(&CommitRequest{Author: "alice", Deadline: t0.Add(time.Minute)}, t0) })
		assert.True(t, win.notBefore.IsZero())
		assert.Len(t, win.requests, 1)
	})
}

func TestAWindowPutBackIsCountedOnceAsPending(t *testing.T) {
	q := newQueue()
	t0 := time.Unix(1000, 0)
	q.add(qkey("a"), anUpdate, "alice", t0)
	q.add(qkey("b"), anUpdate, "bob", t0)
	wins, _ := q.due(WindowConfig{Quiet: time.Second}, t0.Add(time.Hour))
	require.Len(t, wins, 2)
	q.flushing = wins
	q.decline(wins[0], t0.Add(time.Hour)) // the server declined alice's; bob's is being pushed
	assert.Equal(t, 2, q.pending(), "alice's object once, bob's once")
	assert.Len(t, wins, 2, "the worker's own list of the pass is untouched")
	assert.Equal(t, []*authorWindow{wins[1]}, q.flushing)
}

func TestAPersonsChangeTakenIntoALaterWritersWindowIsCredited(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := WindowConfig{Quiet: 5 * time.Second, MaxDelay: 30 * time.Second}
	t.Run("an object leaving a person's window for another's makes them its co-author", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)                                               // alice creates it
		q.add(qkey("a"), anUpdate, "system:serviceaccount:ops:operator", t0.Add(time.Second)) // its operator adds a finalizer
		wins, _ := q.due(cfg, t0.Add(time.Hour))
		require.Len(t, wins, 1)
		assert.Equal(t, []string{"alice"}, wins[0].coAuthors[qkey("a")])
		assert.Empty(t, q.coAuthors, "the window took them along")
	})
	t.Run("a list's change and the committer's credit nobody", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "", t0)
		q.add(qkey("a"), anUpdate, "bob", t0)
		assert.Empty(t, q.coAuthors)
	})
	t.Run("an object a committing window leaves to a later writer takes its credits along", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("a"), anUpdate, "bob", t0)
		wins, _ := q.due(cfg, t0.Add(time.Hour))
		q.add(qkey("a"), anUpdate, "carol", t0.Add(time.Hour)) // while bob's window is planned
		q.tookFrom(qkey("a"), wins[0])                         // which commits without it, and may be pushed
		assert.Equal(t, []string{"alice", "bob"}, q.coAuthors[qkey("a")])
	})
	t.Run("a window put back hands its co-authors, and its author, to where its objects wait", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		q.add(qkey("a"), anUpdate, "bob", t0)
		wins, _ := q.due(cfg, t0.Add(time.Hour))
		q.add(qkey("a"), anUpdate, "carol", t0.Add(time.Hour)) // changed again while bob's window was committed
		q.restore(wins[0], t0.Add(time.Hour))                  // whose push failed
		assert.ElementsMatch(t, []string{"alice", "bob"}, q.coAuthors[qkey("a")])
		assert.Equal(t, "carol", q.owner[qkey("a")])
	})
}

func TestARequestJoiningAWindowBeingCommitted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := WindowConfig{Quiet: 5 * time.Second, MaxDelay: 30 * time.Second}
	closing := func() (*queue, *authorWindow, *CommitRequest) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Minute))
		q.flushing = wins
		r := &CommitRequest{Author: "alice", Deadline: t0.Add(2 * time.Minute)}
		q.request(r, t0.Add(time.Minute))
		return q, wins[0], r
	}
	t.Run("is kept apart from the requests the worker reads without the lock", func(t *testing.T) {
		_, win, r := closing()
		assert.Empty(t, win.requests)
		assert.Equal(t, []*CommitRequest{r}, win.joined)
	})
	t.Run("is answered with the window's own requests when the worker takes it", func(t *testing.T) {
		_, win, r := closing()
		other := &CommitRequest{Author: "alice"}
		win.requests = []*CommitRequest{other}
		assert.Equal(t, []*CommitRequest{other, r}, takeJoined(win))
		assert.Equal(t, []*CommitRequest{other, r}, win.requests)
		assert.Empty(t, win.joined)
	})
	t.Run("is not lost with a window that leaves the queue without taking it", func(t *testing.T) {
		q, win, r := closing()
		q.delivered(win, t0.Add(time.Minute))
		assert.Equal(t, []*CommitRequest{r}, q.waiting["alice"], "it waits for her next change")
		assert.Empty(t, win.joined)
	})
	t.Run("rides the window put back after a failed commit", func(t *testing.T) {
		q, win, r := closing()
		q.retry(win, t0.Add(time.Minute))
		assert.Equal(t, []*CommitRequest{r}, q.windows["alice"].requests)
		assert.Empty(t, q.waiting)
	})
	t.Run("is not taken once withdrawn", func(t *testing.T) {
		q, win, r := closing()
		q.withdraw(r)
		q.delivered(win, t0.Add(time.Minute))
		assert.Empty(t, q.waiting)
	})
	t.Run("waits for the next change once the commit made its message", func(t *testing.T) {
		q := newQueue()
		q.add(qkey("a"), anUpdate, "alice", t0)
		wins, _ := q.due(cfg, t0.Add(time.Minute))
		q.flushing = wins
		wins[0].messageMade = true
		r := &CommitRequest{Author: "alice", Deadline: t0.Add(2 * time.Minute)}
		q.request(r, t0.Add(time.Minute))
		assert.Empty(t, wins[0].joined)
		assert.Equal(t, []*CommitRequest{r}, q.waiting["alice"])
	})
}
