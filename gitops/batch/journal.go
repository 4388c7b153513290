package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// JournalFileName is the file under Options.WorkDir that keeps the deletions given to the
// writer and not written yet.
const JournalFileName = "pending-deletes.jsonl"

// journalMaxAge is how long a deletion stays in the journal without being written: a bound
// on what a start sweep (forgetGoneTargets) and a target's removal do not forget.
const journalMaxAge = 7 * 24 * time.Hour

// deleteJournal keeps on disk the deletions the writer was given and has not written yet.
// Pending work lives in memory as object keys, since the cluster holds each object's state;
// a deletion is the one change a restart cannot read again (the object is gone, and under
// prune mode OnEvent its document would stay as an orphan). A kill -9 between the delete
// event and its push would lose it; the journal hands it to the next process instead.
//
// It is an append-only file of JSON lines ("+" pending, "-" written or forgotten),
// rewritten with only the pending ones when it grows. Writes are not synced: a process
// killed leaves them in the page cache, and only a machine that fails loses them, as it
// loses the work dir (an emptyDir) anyway. A nil journal keeps nothing.
type deleteJournal struct {
	mu    sync.Mutex
	path  string
	log   logr.Logger
	live  map[journalKey]journalEntry
	lines int
	// last numbers the deletions recorded, in order (journalEntry.seq): a window written
	// drops only those recorded before it was detached (mark), not a newer deletion of the
	// same object held elsewhere meanwhile (parked for a target being suspended, say).
	last uint64
	// replayed is last once the file was read at start: the entries an earlier process left
	// are those up to it (forgetRecovered).
	replayed uint64
	// rewriteAt is the line count a rewrite that failed waits for before it is tried again
	// (0: none failed), so a disk that is full is not written the whole file at every entry.
	rewriteAt int
	// torn says the last append failed, maybe part-way: the next one starts a new line, not
	// glued onto a cut one (replay skips blank lines).
	torn bool
}

// journalKey is a deletion's place: its target and object.
type journalKey struct {
	target types.NamespacedName
	key    ObjectKey
}

// journalEntry is one line of the journal.
type journalEntry struct {
	Op        string    `json:"op"`
	Target    string    `json:"target"`
	Group     string    `json:"group,omitempty"`
	Version   string    `json:"version"`
	Resource  string    `json:"resource"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	Author    string    `json:"author,omitempty"`
	At        time.Time `json:"at"`
	// seq is the entry's place in this process's order of records (deleteJournal.last);
	// not written.
	seq uint64
}

func (e journalEntry) place() (journalKey, bool) {
	ns, name, ok := splitKey(e.Target)
	if !ok || e.Resource == "" || e.Name == "" {
		return journalKey{}, false
	}
	return journalKey{target: types.NamespacedName{Namespace: ns, Name: name},
		key: ObjectKey{GVR: schema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource},
			Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}}, true
}

func splitKey(s string) (string, string, bool) {
	ns, name, ok := strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != ""
}

func entryOf(op string, p journalKey, c Change, at time.Time) journalEntry {
	return journalEntry{Op: op, Target: p.target.String(), Group: p.key.GVR.Group, Version: p.key.GVR.Version,
		Resource: p.key.GVR.Resource, Kind: p.key.Kind, Namespace: p.key.Namespace, Name: p.key.Name,
		Author: c.Author, At: at}
}

// recoveredDelete is a deletion an earlier process left pending, and when it was recorded:
// it ages in memory as it would in the file, however long it waits for its list.
type recoveredDelete struct {
	Change
	At time.Time
}

// openJournal reads the journal under dir ("" keeps none) and returns it with the
// deletions an earlier process left pending, per target, as the changes to hand each target
// once it registers. Lines it cannot read are skipped, with a log line; deletions older than
// journalMaxAge are dropped.
func openJournal(dir string, log logr.Logger, now time.Time) (*deleteJournal, map[types.NamespacedName]map[ObjectKey]recoveredDelete) {
	if dir == "" {
		return nil, nil
	}
	j := &deleteJournal{path: filepath.Join(dir, JournalFileName), log: log, live: map[journalKey]journalEntry{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Error(err, "creating the work directory for the journal of pending deletions", "path", dir)
	}
	content, err := os.ReadFile(j.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Kept aside, not overwritten by the rewrite below: what it holds is for a person to
		// read (the documents of its deletions are counted in status.orphans meanwhile).
		aside := fmt.Sprintf("%s.unreadable-%d", j.path, now.Unix())
		if mvErr := os.Rename(j.path, aside); mvErr != nil {
			log.Error(errors.Join(err, mvErr), "the journal of pending deletions can be neither read nor moved aside; "+
				"its deletions' documents count as orphans, and the deletions seen from now on are written where it is, "+
				"which may replace it", "path", j.path)
		} else {
			log.Error(err, "reading the journal of pending deletions; kept aside, starting a new one", "path", j.path, "aside", aside)
		}
	}
	j.replay(content, now)
	j.replayed = j.last
	pending := map[types.NamespacedName]map[ObjectKey]recoveredDelete{}
	for p, e := range j.live {
		if pending[p.target] == nil {
			pending[p.target] = map[ObjectKey]recoveredDelete{}
		}
		pending[p.target][p.key] = recoveredDelete{Change: Change{Target: p.target, Key: p.key, Deleted: true, Author: e.Author}, At: e.At}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rewrite(now) != nil {
		// Left as it was: appends go after its lines, not onto one a kill cut short.
		j.lines = bytes.Count(content, []byte("\n"))
		if len(content) > 0 && content[len(content)-1] != '\n' {
			if err := appendFile(j.path, []byte("\n")); err != nil {
				j.torn = true // the next append starts with it
				j.log.Error(err, "ending the journal's last line", "path", j.path)
			}
		}
	}
	return j, pending
}

// replay applies the journal's lines in order.
func (j *deleteJournal) replay(content []byte, now time.Time) {
	skipped := 0
	// Split, not a bufio.Scanner: a line longer than its buffer (garbage a disk fault left)
	// would end the scan there, and the rewrite at start would drop every line after it.
	for _, line := range bytes.Split(content, []byte("\n")) {
		var e journalEntry
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p, ok := journalKey{}, false
		if err := json.Unmarshal(line, &e); err == nil {
			p, ok = e.place()
		}
		switch {
		case !ok:
			skipped++ // a line cut short by a kill, say
		case e.Op == "+" && now.Sub(e.At) <= journalMaxAge:
			j.last++
			e.seq = j.last
			j.live[p] = e
		default:
			delete(j.live, p)
		}
	}
	if skipped > 0 {
		j.log.Info("skipped unreadable lines of the journal of pending deletions", "path", j.path, "lines", skipped)
	}
}

// record keeps the deletions from events among changes, in one write. One a list found
// (Relisted: a prune) a restart's list finds again; its author would also replace the
// event's.
func (j *deleteJournal) record(changes ...Change) {
	if j == nil {
		return
	}
	now := time.Now()
	var out []journalEntry
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range changes {
		if !c.Deleted || c.Relisted {
			continue
		}
		p := journalKey{target: c.Target, key: c.Key}
		e := entryOf("+", p, c, now)
		j.last++
		e.seq = j.last
		j.live[p] = e
		out = append(out, e)
	}
	j.append(out)
}

// mark is the place of the last deletion recorded, for writtenUpTo. Zero for a nil journal.
func (j *deleteJournal) mark() uint64 {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// written drops the deletions of keys on target: forgotten with their target, or
// recorded again under another version.
func (j *deleteJournal) written(target types.NamespacedName, keys []ObjectKey) {
	j.writtenUpTo(target, keys, math.MaxUint64)
}

// writtenUpTo drops the deletions of keys on target recorded up to mark: written (or
// refused, which status says) by a window detached at mark. One recorded since is a newer
// delete of the object, which that window did not carry.
func (j *deleteJournal) writtenUpTo(target types.NamespacedName, keys []ObjectKey, mark uint64) {
	if j == nil || len(keys) == 0 {
		return
	}
	now := time.Now()
	var out []journalEntry
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, k := range keys {
		p := journalKey{target: target, key: k}
		if e, ok := j.live[p]; ok && e.seq <= mark {
			delete(j.live, p)
			out = append(out, entryOf("-", p, Change{}, now))
		}
	}
	j.append(out)
}

// forget drops every deletion of target (a deleted GitTarget).
func (j *deleteJournal) forget(target types.NamespacedName) {
	j.forgetUpTo(target, math.MaxUint64)
}

// forgetRecovered drops the deletions of target an earlier process left (a GitTarget
// deleted while no process ran), not one recorded since for a target of that name made
// again.
func (j *deleteJournal) forgetRecovered(target types.NamespacedName) {
	if j == nil {
		return
	}
	j.mu.Lock()
	replayed := j.replayed
	j.mu.Unlock()
	j.forgetUpTo(target, replayed)
}

func (j *deleteJournal) forgetUpTo(target types.NamespacedName, mark uint64) {
	if j == nil {
		return
	}
	var keys []ObjectKey
	j.mu.Lock()
	for p := range j.live {
		if p.target == target {
			keys = append(keys, p.key)
		}
	}
	j.mu.Unlock()
	j.writtenUpTo(target, keys, mark)
}

// append writes entries as lines, or rewrites the file with the pending deletions only
// once it holds many more lines than those. Callers hold j.mu.
func (j *deleteJournal) append(entries []journalEntry) {
	if len(entries) == 0 {
		return
	}
	if j.lines+len(entries) > 4*len(j.live)+1024 && j.lines >= j.rewriteAt {
		if j.rewrite(time.Now()) == nil {
			j.rewriteAt = 0
			return
		}
		j.rewriteAt = 2 * (j.lines + len(entries))
	}
	// Appended, also when the rewrite failed (no inode left for its temporary file, say):
	// otherwise every later entry would be lost with it, the file still growing on.
	b := lines(entries)
	if j.torn {
		b = append([]byte("\n"), b...)
	}
	if err := appendFile(j.path, b); err != nil {
		j.torn = true
		j.log.Error(err, "keeping pending deletions on disk; a restart before they are written would leave their documents", "path", j.path)
		return
	}
	j.torn = false
	j.lines += len(entries)
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rewrite replaces the file by the pending deletions, in one rename. Callers hold j.mu.
// Deletions older than journalMaxAge at now go, as a start would drop them: those of a
// GitTarget deleted while no process ran are never written, and a process that runs for
// weeks would otherwise keep them.
func (j *deleteJournal) rewrite(now time.Time) error {
	entries := make([]journalEntry, 0, len(j.live))
	for p, e := range j.live {
		if now.Sub(e.At) > journalMaxAge {
			delete(j.live, p)
			continue
		}
		entries = append(entries, e)
	}
	tmp := j.path + ".tmp"
	err := os.WriteFile(tmp, lines(entries), 0o600)
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		j.log.Error(err, "rewriting the journal of pending deletions", "path", j.path)
		return err
	}
	j.lines, j.torn = len(entries), false
	return nil
}

// lines encodes entries as JSON lines. Strings and a time always encode.
func lines(entries []journalEntry) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range entries {
		_ = enc.Encode(e)
	}
	return b.Bytes()
}
