package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Every commit leaves its handful of objects in the clone, loose, one file each; a wide
// folder tree alone is tens of kilobytes. Nothing in go-git packs or prunes them, so a
// clone of a busy 50,000-file folder grew by about 45 KB per commit, hundreds of megabytes a
// day. The writer needs only the tip it builds on, so compaction packs the tip's objects
// into one packfile, marks the tip shallow and deletes everything else. It is due at the
// thresholds of `git gc --auto`.
const (
	// compactLooseObjects is git's gc.auto: loose objects that make compaction due.
	compactLooseObjects = 6700
	// compactPacks is git's gc.autoPackLimit: packfiles that make compaction due.
	compactPacks = 50
	// compactRetryAfter spaces attempts after a failed compaction, so a clone that cannot be
	// compacted (a file it cannot delete, a full disk) is not rewritten on every push.
	compactRetryAfter = 10 * time.Minute
)

// compactionThresholds make compaction due: loose objects or packfiles at least these (0:
// never for that count).
type compactionThresholds struct{ loose, packs int }

// Defaults of SetCompactionThresholds, git gc --auto's: gc.auto loose objects and
// gc.autoPackLimit packfiles.
const (
	DefaultCompactLooseObjects = compactLooseObjects
	DefaultCompactPacks        = compactPacks
)

// SetCompactionThresholds sets when CompactIfDue compacts: at looseObjects loose objects
// or packfiles packfiles; 0 turns that trigger off. The defaults are git gc --auto's.
func (r *Repo) SetCompactionThresholds(looseObjects, packfiles int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.compactAt = compactionThresholds{loose: looseObjects, packs: packfiles}
}

// CompactionStats says what a compaction kept and removed, for the log.
type CompactionStats struct {
	// Kept is the number of objects of the tip, now in one packfile.
	Kept int
	// LooseRemoved and PacksRemoved count what was deleted.
	LooseRemoved, PacksRemoved int
	// Took is how long it held the clone.
	Took time.Duration
}

// CompactIfDue compacts the clone (see Compact) when it holds compactLooseObjects loose
// objects or compactPacks packfiles, and only between commits: never while a commit waits
// for its push, nor within compactRetryAfter of a failed attempt. It reports whether it
// compacted.
func (r *Repo) CompactIfDue(branch string) (bool, CompactionStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fresh != nil || time.Since(r.compactFailed) < compactRetryAfter {
		return false, CompactionStats{}, nil
	}
	due, err := r.compactionDue()
	if err != nil {
		r.compactFailed = time.Now() // also a failed attempt: the caller checks the clone for each
		return false, CompactionStats{}, err
	}
	if !due {
		return false, CompactionStats{}, nil
	}
	if tip, err := r.tipToKeep(branch); err != nil {
		r.compactFailed = time.Now()
		return false, CompactionStats{}, err
	} else if tip.IsZero() {
		return false, CompactionStats{}, nil // a branch the writer has yet to create: nothing to keep
	}
	stats, err := r.compact(branch)
	if err != nil {
		r.compactFailed = time.Now()
	}
	return err == nil, stats, err
}

// Compact keeps only what the writer needs: the tip of branch's tracking ref, with every
// tree and blob of it, in one packfile, the tip marked shallow; every other object, loose
// or packed, is deleted. Fetch tells the remote the clone is shallow, so later fetches still
// bring every object a new commit needs. A crash part-way leaves a valid clone: the pack is
// complete before the tip is marked shallow, and objects are deleted last.
// It fails with ErrCommitPending while a commit waits for its push.
func (r *Repo) Compact(branch string) (CompactionStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fresh != nil {
		return CompactionStats{}, ErrCommitPending
	}
	return r.compact(branch)
}

// compactionDue counts loose objects and packfiles. Callers hold r.mu.
func (r *Repo) compactionDue() (bool, error) {
	loose, packed, err := r.objectStores()
	if err != nil {
		return false, err
	}
	packs, err := packed.ObjectPacks()
	if err != nil {
		return false, fmt.Errorf("list packfiles in %s: %w", r.dir, err)
	}
	if r.compactAt.packs > 0 && len(packs) >= r.compactAt.packs {
		return true, nil
	}
	if r.compactAt.loose <= 0 {
		return false, nil
	}
	if !r.looseCounted {
		n := 0
		if err := loose.ForEachObjectHash(func(plumbing.Hash) error { n++; return nil }); err != nil {
			return false, fmt.Errorf("count loose objects in %s: %w", r.dir, err)
		}
		r.loose, r.looseCounted = n, true
	}
	return r.loose >= r.compactAt.loose, nil
}

// tipToKeep is the tip of branch's tracking ref, zero when there is none: the remote has
// no such branch yet, or no longer (Fetch dropped the ref). Callers hold r.mu.
func (r *Repo) tipToKeep(branch string) (plumbing.Hash, error) {
	tip, err := r.trackingTip(branch)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	return tip, err
}

// objectStores returns the clone's loose and packed object stores.
func (r *Repo) objectStores() (storer.LooseObjectStorer, storer.PackedObjectStorer, error) {
	loose, ok := r.git.Storer.(storer.LooseObjectStorer)
	packed, ok2 := r.git.Storer.(storer.PackedObjectStorer)
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("clone %s: object store cannot be compacted", r.dir)
	}
	return loose, packed, nil
}

// compact does Compact's work. Callers hold r.mu and have checked that no commit waits for
// its push.
func (r *Repo) compact(branch string) (stats CompactionStats, err error) {
	start := time.Now()
	tip, err := r.tipToKeep(branch)
	if err != nil || tip.IsZero() {
		return stats, err
	}
	if err := r.git.Storer.RemoveReference(deepenRef); err != nil {
		return stats, fmt.Errorf("remove %s before keeping only the tip: %w", deepenRef, err)
	}
	loose, packed, err := r.objectStores()
	if err != nil {
		return stats, err
	}
	removeStalePackTemps(r.dir)
	oldPacks, err := packed.ObjectPacks()
	if err != nil {
		return stats, fmt.Errorf("list packfiles in %s: %w", r.dir, err)
	}
	keep, err := r.reachableFromTip(tip)
	if err != nil {
		return stats, err
	}
	// From here on go-git's cached pack indexes and loose-object list may name files that
	// are gone; whatever happens, read the store afresh.
	defer func() {
		if rerr := r.reopen(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	pack, err := r.packTip(tip, keep)
	if err != nil {
		return stats, err
	}
	stats.Kept = len(keep)
	// Best effort from here: every object left behind is merely unused.
	var errs []error
	stats.LooseRemoved, err = deleteLoose(loose)
	errs = append(errs, err)
	for _, h := range oldPacks {
		if h == pack {
			continue // the very same pack written again
		}
		if err := packed.DeleteOldObjectPackAndIndex(h, time.Time{}); err != nil {
			errs = append(errs, fmt.Errorf("packfile %s: %w", h, err))
			continue
		}
		stats.PacksRemoved++
	}
	stats.Took = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return stats, fmt.Errorf("delete unused objects in %s: %w", r.dir, err)
	}
	return stats, nil
}

// packTip writes keep, the objects reachable from tip, into one packfile on disk (synced)
// and marks tip shallow, so that the clone needs nothing else: the objects left behind can
// go. It returns the packfile's checksum.
func (r *Repo) packTip(tip plumbing.Hash, keep []plumbing.Hash) (plumbing.Hash, error) {
	pack, err := r.writePack(keep)
	if err != nil {
		return pack, err
	}
	if pack.IsZero() {
		return pack, fmt.Errorf("packfile written in %s without a checksum", r.dir)
	}
	if err := syncPack(r.dir, pack); err != nil {
		return pack, err
	}
	if err := r.git.Storer.SetShallow([]plumbing.Hash{tip}); err != nil {
		return pack, fmt.Errorf("mark %s shallow in %s: %w", tip, r.dir, err)
	}
	return pack, syncFile(filepath.Join(r.dir, "shallow"))
}

// reopen reads the store afresh, dropping go-git's caches of pack indexes and loose objects
// (and the count of loose objects: a partial deletion leaves some).
func (r *Repo) reopen() error {
	r.looseCounted = false
	g, err := openStore(r.dir)
	if err != nil {
		closeStore(r.git) // it reopens what it needs: no descriptor of a deleted pack stays
		if ix, ok := r.git.Storer.(interface{ Reindex() }); ok {
			ix.Reindex()
		}
		return fmt.Errorf("reopen %s after compaction: %w", r.dir, err)
	}
	closeStore(r.git)
	r.git = g
	return nil
}

// removeStalePackTemps deletes what an interrupted object or packfile write left behind
// (go-git does not clean up after a failed write or a kill): temporary files, and a pack
// index without its pack. go-git writes the index before it renames the pack into place,
// and skips writing an index that exists, so a truncated one left by a kill would later be
// taken as the index of the same pack fetched again. Only this process writes here, under
// r.mu (or before the clone is opened).
func removeStalePackTemps(dir string) {
	packDir := filepath.Join(dir, "objects", "pack")
	for _, pattern := range []string{"tmp_pack_*", "tmp_obj_*"} {
		temps, _ := filepath.Glob(filepath.Join(packDir, pattern))
		for _, f := range temps {
			_ = os.Remove(f)
		}
	}
	indexes, _ := filepath.Glob(filepath.Join(packDir, "pack-*.idx"))
	for _, idx := range indexes {
		if _, err := os.Stat(strings.TrimSuffix(idx, ".idx") + ".pack"); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(idx)
		}
	}
}

// syncPack makes the new packfile, its index and their directory durable before anything
// they replace is deleted: after a power loss the clone must not lack both copies.
func syncPack(dir string, pack plumbing.Hash) error {
	packDir := filepath.Join(dir, "objects", "pack")
	for _, f := range []string{"pack-" + pack.String() + ".pack", "pack-" + pack.String() + ".idx", ""} {
		if err := syncFile(filepath.Join(packDir, f)); err != nil {
			return err
		}
	}
	return nil
}

// syncFile flushes a file or directory to stable storage.
func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return nil
}

// reachableFromTip lists tip, its trees and blobs (gitlinks name commits of other
// repositories and are not stored here).
func (r *Repo) reachableFromTip(tip plumbing.Hash) ([]plumbing.Hash, error) {
	c, err := r.git.CommitObject(tip)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", tip, err)
	}
	out := []plumbing.Hash{tip}
	seen := map[plumbing.Hash]bool{}
	var walk func(h plumbing.Hash) error
	walk = func(h plumbing.Hash) error {
		if seen[h] {
			return nil
		}
		seen[h] = true
		out = append(out, h)
		t, err := r.tree(h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
		for _, e := range t.Entries {
			switch {
			case e.Mode == filemode.Dir:
				if err := walk(e.Hash); err != nil {
					return err
				}
			case e.Mode != filemode.Submodule && !seen[e.Hash]:
				seen[e.Hash] = true
				out = append(out, e.Hash)
			}
		}
		return nil
	}
	return out, walk(c.TreeHash)
}

// writePack stores hashes in one new packfile (with its index) and returns its checksum.
func (r *Repo) writePack(hashes []plumbing.Hash) (plumbing.Hash, error) {
	pw, ok := r.git.Storer.(storer.PackfileWriter)
	if !ok {
		return plumbing.ZeroHash, fmt.Errorf("clone %s cannot write packfiles", r.dir)
	}
	// A reader of its own, with a small cache: packing reads every object of the tip once,
	// which through the clone's store would only evict what its cache holds for the writer.
	src := filesystem.NewStorageWithOptions(osfs.New(r.dir), cache.NewObjectLRU(cache.MiByte), filesystem.Options{KeepDescriptors: true})
	defer func() { _ = src.Close() }()
	return writePackfile(pw, src, hashes, r.dir)
}

// deleteLoose deletes every loose object (the ones still needed are in the new pack), going
// on past failures.
func deleteLoose(loose storer.LooseObjectStorer) (int, error) {
	var hashes []plumbing.Hash
	if err := loose.ForEachObjectHash(func(h plumbing.Hash) error {
		hashes = append(hashes, h)
		return nil
	}); err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, h := range hashes {
		if err := loose.DeleteLooseObject(h); err != nil {
			errs = append(errs, fmt.Errorf("loose object %s: %w", h, err))
			continue
		}
		removed++
	}
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more", len(errs)-3))
	}
	return removed, errors.Join(errs...)
}
