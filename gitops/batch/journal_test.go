package batch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestDeleteJournal(t *testing.T) {
	live, staging := types.NamespacedName{Namespace: "ops", Name: "live"}, types.NamespacedName{Namespace: "ops", Name: "staging"}
	deletion := func(target types.NamespacedName, name, author string) Change {
		return Change{Target: target, Key: qkey(name), Deleted: true, Author: author}
	}
	reopen := func(dir string, now time.Time) map[types.NamespacedName]map[ObjectKey]Change {
		return reopenedChanges(t, dir, now)
	}

	t.Run("hands a restart the deletions not written yet, with their authors", func(t *testing.T) {
		dir := t.TempDir()
		j, pending := openJournal(dir, logr.Discard(), time.Now())
		assert.Empty(t, pending)
		j.record(deletion(live, "a", "alice"))
		j.record(deletion(staging, "b", ""))
		j.record(Change{Target: live, Key: qkey("c"), Author: "bob"})                 // an update: the cluster has it
		j.record(Change{Target: live, Key: qkey("d"), Deleted: true, Relisted: true}) // a prune: the next list finds it again
		j.record(Change{Target: live, Key: qkey("a"), Deleted: true, Relisted: true}) // nor does one take alice's deletion
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{
			live:    {qkey("a"): deletion(live, "a", "alice")},
			staging: {qkey("b"): deletion(staging, "b", "")},
		}, reopen(dir, time.Now()))
	})
	t.Run("forgets deletions once written, and every one of a deleted GitTarget", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "a", "alice"))
		j.record(deletion(live, "b", "alice"))
		j.record(deletion(staging, "c", "bob"))
		j.record(deletion(staging, "d", "bob"))
		j.written(live, []ObjectKey{qkey("a"), qkey("never-recorded")})
		j.forget(staging)
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("b"): deletion(live, "b", "alice")}}, reopen(dir, time.Now()))
	})
	t.Run("keeps a deletion recorded again after it was written", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "a", "alice"))
		j.written(live, []ObjectKey{qkey("a")})
		j.record(deletion(live, "a", "bob")) // created again and deleted again
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("a"): deletion(live, "a", "bob")}}, reopen(dir, time.Now()))
	})
	t.Run("skips a line a kill cut short and reads the others", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "a", "alice"))
		appendRaw(t, dir, `{"op":"+","target":"ops/live","version":"v1","reso`) // a line a kill cut short
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("a"): deletion(live, "a", "alice")}}, reopen(dir, time.Now()))
	})
	t.Run("drops a deletion no registration took for a week", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "a", "alice"))
		assert.Empty(t, reopen(dir, time.Now().Add(8*24*time.Hour)))
		assert.Empty(t, reopen(dir, time.Now()), "and from the file")
	})
	t.Run("drops at a rewrite a deletion a long-running process kept for a week", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(staging, "a", "alice")) // of a GitTarget deleted while no process ran: never taken
		j.record(deletion(live, "b", "bob"))
		j.mu.Lock()
		for p, e := range j.live {
			if p.target == staging {
				e.At = time.Now().Add(-8 * 24 * time.Hour)
				j.live[p] = e
			}
		}
		j.rewrite(time.Now())
		j.mu.Unlock()
		content, err := os.ReadFile(filepath.Join(dir, JournalFileName))
		require.NoError(t, err)
		assert.NotContains(t, string(content), `"target":"ops/staging"`)
		assert.Contains(t, string(content), `"target":"ops/live"`)
	})
	t.Run("rewrites the file with the pending deletions once it holds many more lines", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		for i := range 3000 {
			name := "cm-" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
			j.record(deletion(live, name, "alice"))
			j.written(live, []ObjectKey{qkey(name)})
		}
		j.record(deletion(live, "kept", "alice"))
		content, err := os.ReadFile(filepath.Join(dir, JournalFileName))
		require.NoError(t, err)
		assert.Less(t, strings.Count(string(content), "\n"), 1100, "bounded by the pending deletions, not by all there were")
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("kept"): deletion(live, "kept", "alice")}}, reopen(dir, time.Now()))
	})
	t.Run("keeps appending when the file cannot be rewritten", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, JournalFileName+".tmp"), 0o755)) // its temporary file cannot be made
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		for i := range 1100 {
			name := fmt.Sprintf("cm-%d", i)
			j.record(deletion(live, name, "alice"))
			j.written(live, []ObjectKey{qkey(name)})
		}
		j.record(deletion(live, "kept", "alice"))
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("kept"): deletion(live, "kept", "alice")}}, reopen(dir, time.Now()))
	})
	t.Run("tries a rewrite that failed again only once the file doubled", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, JournalFileName+".tmp"), 0o755))
		failures := 0
		log := funcr.New(func(_, args string) {
			if strings.Contains(args, "rewriting the journal") {
				failures++
			}
		}, funcr.Options{})
		j, _ := openJournal(dir, log, time.Now())
		failures = 0 // the one at start
		for i := range 1100 {
			j.record(deletion(live, fmt.Sprintf("cm-%d", i), "alice"))
		}
		for i := range 1100 {
			j.written(live, []ObjectKey{qkey(fmt.Sprintf("cm-%d", i))})
		}
		assert.Equal(t, 1, failures, "not once per entry: a full disk is not written the whole file each time")
	})
	t.Run("appends after a line a kill cut short when the file cannot be rewritten at start", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "a", "alice"))
		appendRaw(t, dir, `{"op":"+","target":"ops/live","version":"v1","reso`) // a line a kill cut short
		require.NoError(t, os.MkdirAll(filepath.Join(dir, JournalFileName+".tmp"), 0o755))
		j, _ = openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "b", "bob"))
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("a"): deletion(live, "a", "alice"), qkey("b"): deletion(live, "b", "bob")}},
			reopen(dir, time.Now()), "b's line is not glued onto the cut one")
	})
	t.Run("starts a new line after an append that failed part-way", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "a", "alice"))
		appendRaw(t, dir, `{"op":"+","target":"ops/live","ver`) // what a write cut short by a full disk left
		j.mu.Lock()
		j.torn = true // as appendFile's failure leaves it
		j.mu.Unlock()
		j.record(deletion(live, "b", "bob"))
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("a"): deletion(live, "a", "alice"), qkey("b"): deletion(live, "b", "bob")}},
			reopen(dir, time.Now()))
	})
	t.Run("reads the lines after one too long for a line reader", func(t *testing.T) {
		dir := t.TempDir()
		j, _ := openJournal(dir, logr.Discard(), time.Now())
		j.record(deletion(live, "a", "alice"))
		appendRaw(t, dir, strings.Repeat("x", 2<<20)+"\n") // garbage a disk fault left
		j.record(deletion(live, "b", "bob"))
		assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("a"): deletion(live, "a", "alice"), qkey("b"): deletion(live, "b", "bob")}},
			reopen(dir, time.Now()))
	})
	t.Run("keeps nothing without a work directory", func(t *testing.T) {
		j, pending := openJournal("", logr.Discard(), time.Now())
		assert.Nil(t, j)
		assert.Nil(t, pending)
		j.record(deletion(live, "a", "alice")) // a nil journal is a no-op
		j.written(live, []ObjectKey{qkey("a")})
		j.forget(live)
	})
}

func TestAJournalThatCannotBeReadIsKeptAsideNotOverwritten(t *testing.T) {
	dir := t.TempDir()
	unreadable := filepath.Join(dir, JournalFileName)
	require.NoError(t, os.MkdirAll(unreadable, 0o755)) // reading a directory fails, as a disk error would
	require.NoError(t, os.WriteFile(filepath.Join(unreadable, "evidence"), []byte("kept"), 0o600))
	now := time.Now()

	j, pending := openJournal(dir, logr.Discard(), now)
	assert.Empty(t, pending)
	kept, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.unreadable-%d", JournalFileName, now.Unix()), "evidence"))
	require.NoError(t, err, "what could not be read is still there")
	assert.Equal(t, "kept", string(kept))

	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	j.record(Change{Target: target, Key: qkey("a"), Deleted: true, Author: "alice"})
	_, pending = openJournal(dir, logr.Discard(), now)
	assert.Len(t, pending[target], 1, "a new journal works in its place")
}

func TestTheJournalKeepsTheNewerDeletionsAuthor(t *testing.T) {
	dir := t.TempDir()
	j, _ := openJournal(dir, logr.Discard(), time.Now())
	w := newWorker(workerKey{url: "https://git.example/repo.git", branch: "main"}, nil, Options{}, func(*CommitRequest, RequestOutcome) {})
	w.journal = j
	live := types.NamespacedName{Namespace: "ops", Name: "live"}
	w.openQueue(live)
	bob := Change{Target: live, Key: qkey("a"), Deleted: true, Author: "bob"}
	w.submit(bob)
	w.submitOlder(Change{Target: live, Key: qkey("a"), Deleted: true, Author: "alice"}) // kept from before
	assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("a"): bob}}, reopenedChanges(t, dir, time.Now()))
}

func TestChangesOfATargetNotRegisteredYetAreKeptWhenAsked(t *testing.T) {
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir()})
	live := types.NamespacedName{Namespace: "ops", Name: "live"}
	deletion := Change{Target: live, Key: qkey("a"), Deleted: true, Author: "alice"}
	update := Change{Target: live, Key: qkey("b"), Author: "bob"}
	m.Submit(Change{Target: live, Key: qkey("b")})
	assert.Empty(t, m.parked[live], "an unknown target's update by no one known is dropped: its registration brings a snapshot")
	m.KeepChanges(live) // its credentials in their grace period on a new leader: admission lets changes through
	m.Submit(deletion, update)
	assert.Equal(t, map[ObjectKey]Change{qkey("a"): deletion, qkey("b"): update}, m.parked[live], "with its author")
	assert.Equal(t, map[types.NamespacedName]map[ObjectKey]Change{live: {qkey("a"): deletion}}, reopenedChanges(t, m.opts.WorkDir, time.Now()), "and journalled")
}

// reopenedChanges is what a start at now reads from the journal under dir, as changes.
func reopenedChanges(t *testing.T, dir string, now time.Time) map[types.NamespacedName]map[ObjectKey]Change {
	t.Helper()
	_, pending := openJournal(dir, logr.Discard(), now)
	changes := map[types.NamespacedName]map[ObjectKey]Change{}
	for target, keys := range pending {
		changes[target] = map[ObjectKey]Change{}
		for k, d := range keys {
			assert.WithinDuration(t, now, d.At, 9*24*time.Hour, "it carries when it was recorded")
			changes[target][k] = d.Change
		}
	}
	return changes
}

// appendRaw appends text to the journal file under dir, as a kill or a disk fault leaves it.
func appendRaw(t *testing.T, dir, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, JournalFileName), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
