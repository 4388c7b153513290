package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// remoteName is the only remote a Repo has; the clone mirrors exactly one
// repository.
const remoteName = "origin"

// Repo is a persistent local bare clone (no worktree at all) of one remote,
// used as a cache: the remote is the truth. It is safe for concurrent use;
// operations are serialised.
type Repo struct {
	mu  sync.Mutex
	dir string
	url string
	// shown is the address errors name: the acting target's (ActAs), else url.
	shown    string
	auth     transport.AuthMethod
	git      *git.Repository
	repaired error
	// fresh holds the objects of the last commit made, in memory. The push that follows
	// sends them from here and stores them in the clone only once the remote has them (as
	// the very pack it sent, when that held exactly them: keepsPack), so storing them is
	// not on the delivery path; any other read stores them first (storeFresh). Nil when
	// there is none.
	fresh *objectBuffer
	// trees caches decoded wide trees (see treeCache).
	trees *treeCache
	// compactAt says when CompactIfDue compacts; compactFailed is the last failed attempt.
	compactAt     compactionThresholds
	compactFailed time.Time
	// loose counts the clone's loose objects once looseCounted: counted on disk on first
	// need, then kept up to date by storeFresh, since counting walks 256 directories.
	loose        int
	looseCounted bool
}

// Open opens the bare clone in dir for url, creating it when dir is missing or
// empty. A clone that fails verification (unopenable, unreadable config, a ref
// file that is empty or garbage, a ref to a missing object, a different
// remote) is removed and re-initialised instead of failing, because a crash
// must never stall the writer; RepairedDamage tells what was found. Only what
// cannot be fixed is an error, for example a dir that holds something other
// than a bare repository (ErrNotRepository).
func Open(ctx context.Context, dir, url string, auth transport.AuthMethod) (*Repo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open clone: %w", err)
	}
	if dir == "" || url == "" {
		return nil, errors.New("open clone: dir and url are required")
	}
	if opaque(url) {
		return nil, fmt.Errorf("open clone of %s: %w", Redact(url), ErrOpaqueURL)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open clone %s: %w", dir, err)
	}
	url, auth = splitCredentials(url, auth) // the clone's config on disk never holds them
	r := &Repo{dir: abs, url: url, shown: url, auth: auth, trees: newTreeCache(),
		compactAt: compactionThresholds{loose: compactLooseObjects, packs: compactPacks}}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load opens or creates the clone, repairing it when verification fails.
func (r *Repo) load() error {
	_ = os.RemoveAll(r.dir + removingSuffix) // best effort: what a repair killed part-way left
	removeStalePackTemps(r.dir)
	g, damage := openOrInit(r.dir)
	if damage == nil {
		// A deepen a kill cut short: its ref may name a commit compaction has since deleted.
		_ = g.Storer.RemoveReference(deepenRef)
		damage = verify(g, r.url, false)
	}
	if damage != nil {
		closeStore(g)
		fresh, err := reinit(r.dir)
		if err != nil {
			return fmt.Errorf("repair clone %s (damage: %v): %w", r.dir, damage, err)
		}
		g, r.repaired = fresh, damage
	}
	if err := ensureRemote(g, r.url); err != nil {
		closeStore(g)
		return fmt.Errorf("configure remote in %s: %w", r.dir, scrub(err, r.url))
	}
	r.git = g
	return nil
}

// Dir returns the absolute path of the clone.
func (r *Repo) Dir() string { return r.dir }

// URL returns the remote URL the clone mirrors.
func (r *Repo) URL() string { return r.url }

// RepairedDamage returns the damage Open found and repaired by re-initialising
// the clone (wrapping ErrDamaged), or nil when the clone was healthy. Callers
// surface it in status and metrics so a crash-damaged clone is visible.
func (r *Repo) RepairedDamage() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.repaired
}

// Verify checks the clone the way Open does, and also reads every blob of the refs'
// trees, and returns an error wrapping ErrDamaged when it is damaged. Call it after an
// unexpected read error to decide whether to Reset: it tells a clone that lost or garbled
// an object (a kill during compaction, a disk fault) from a read that failed for another
// reason.
func (r *Repo) Verify() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.storeFresh(); err != nil {
		return err
	}
	return verify(r.git, r.url, true)
}

// storeFresh stores the last commit's objects in the clone if they are not there yet.
// Callers hold r.mu.
func (r *Repo) storeFresh() error {
	if r.fresh == nil || r.fresh.stored {
		return nil
	}
	n, err := r.fresh.flush(r.dir)
	r.loose += n
	if err != nil {
		return fmt.Errorf("storing the last commit's objects in %s: %w", r.dir, err)
	}
	r.fresh.stored = true
	return nil
}

// Close releases the clone's open packfiles and its in-memory caches; the clone stays on
// disk for the next Open. A closed Repo still works (the store reopens files as it needs
// them), so a late call is slow, never wrong. Every commit's objects are already stored by
// then: Push stores them once delivered and forgets those of a failed push.
func (r *Repo) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.storeFresh()
	r.release()
	return err
}

// release drops the in-memory caches and closes the store's open packfiles. Callers hold r.mu.
func (r *Repo) release() {
	r.fresh, r.trees = nil, newTreeCache()
	closeStore(r.git)
}

// RemoveDir deletes the clone in dir that no Repo has open (removeClone), for a clone no
// GitTarget needs any more; a missing dir is fine.
func RemoveDir(dir string) error {
	return removeClone(dir)
}

// Remove closes the clone and deletes it from disk (removeClone), for a clone no GitTarget
// needs any more. The Repo must not be used afterwards.
func (r *Repo) Remove() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.release()
	return removeClone(r.dir)
}

// Reset discards the local clone and starts again from an empty one; the next
// Fetch downloads the branch afresh. It is the remedy for local corruption,
// since the remote is the truth.
func (r *Repo) Reset() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fresh = nil
	r.looseCounted = false
	closeStore(r.git) // a closed store still works, reopening files as it needs them
	g, err := reinit(r.dir)
	if err != nil {
		return fmt.Errorf("reset clone %s: %w", r.dir, err)
	}
	// The new clone from now on, whatever happens next: the old one is gone. A remote that
	// cannot be configured now is configured by the next fetch.
	r.git = g
	return r.configureOrigin()
}

// configureOrigin makes sure the clone's config names the remote it fetches from: a reset
// that failed after re-initialising the clone left none. Callers hold r.mu.
func (r *Repo) configureOrigin() error {
	if err := ensureRemote(r.git, r.url); err != nil {
		return fmt.Errorf("configure remote in %s: %w", r.dir, scrub(err, r.url))
	}
	return nil
}

// openOrInit opens the bare repository in dir, or initialises one when dir is
// missing or empty. An error means the existing content is damaged.
func openOrInit(dir string) (*git.Repository, error) {
	empty, err := isEmptyDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	if empty {
		if _, err := git.PlainInit(dir, true); err != nil {
			return nil, fmt.Errorf("%w: init: %v", ErrDamaged, err)
		}
	}
	g, err := openStore(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: open: %v", ErrDamaged, err)
	}
	return g, nil
}

// openStore opens the bare repository in dir with a store that keeps up to
// maxOpenPackfiles packfiles open: go-git otherwise opens, reads the header of and closes
// the pack for every object it reads, which was a quarter of a restart's plan (0.1 ms of
// 0.4 ms per unchanged object). Compaction keeps a clone under DefaultCompactPacks packs,
// so normally every pack stays open; when it cannot run (pushes keep failing, so a commit
// stays pending) the least recently opened pack is closed instead of the count growing.
// closeStore releases them when the store is replaced.
func openStore(dir string) (*git.Repository, error) {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		return nil, fmt.Errorf("%s is not a bare repository: %w", dir, git.ErrRepositoryNotExists)
	}
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(), filesystem.Options{MaxOpenDescriptors: maxOpenPackfiles})
	return git.Open(st, nil)
}

// maxOpenPackfiles bounds the packfiles a clone's store keeps open (see openStore).
const maxOpenPackfiles = 64

// closeStore closes the packfiles a store opened by openStore keeps; g may be nil.
func closeStore(g *git.Repository) {
	if g == nil {
		return
	}
	if c, ok := g.Storer.(io.Closer); ok {
		_ = c.Close()
	}
}

// isEmptyDir reports whether dir is missing or has no entries.
func isEmptyDir(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return len(entries) == 0, nil
}

// verify checks what a crash or an operator mistake can break: the config,
// the remote, HEAD, and every ref (readable, pointing at a commit we have, whose
// trees are all there; with readBlobs, every blob also decompresses). Without
// readBlobs blobs are not looked at: asking for each one costs a failed open() of
// its loose path first (a 50,000-file tip took 0.9 s instead of 20 ms), under the
// Manager's lock; a missing blob is found when a read of it fails (Verify).
func verify(g *git.Repository, url string, readBlobs bool) error {
	cfg, err := g.Config()
	if err != nil {
		return fmt.Errorf("%w: config unreadable: %v", ErrDamaged, err)
	}
	if !cfg.Core.IsBare {
		return fmt.Errorf("%w: not a bare repository", ErrDamaged)
	}
	if rc, ok := cfg.Remotes[remoteName]; ok && !sameRemote(rc, url) {
		return fmt.Errorf("%w: clone belongs to another remote", ErrDamaged)
	}
	if _, err := g.Storer.Reference(plumbing.HEAD); err != nil {
		return fmt.Errorf("%w: HEAD unreadable: %v", ErrDamaged, err)
	}
	return verifyRefs(g, readBlobs)
}

// sameRemote reports whether the configured remote is url's repository (RepositoryKey):
// the targets sharing a clone may dial it as different ssh users.
func sameRemote(rc *config.RemoteConfig, url string) bool {
	return len(rc.URLs) == 1 && RepositoryKey(rc.URLs[0]) == RepositoryKey(url)
}

// verifyRefs checks that every ref is readable and that each hash ref points
// to a commit whose trees are present and decodable, and with readBlobs whose
// blobs are too. The clone has a handful of refs and keeps no history the
// writer reads, so this reads one tree per directory of the branch; history is
// not checked, since the clone is shallow.
func verifyRefs(g *git.Repository, readBlobs bool) error {
	iter, err := g.Storer.IterReferences()
	if err != nil {
		return fmt.Errorf("%w: refs unreadable: %v", ErrDamaged, err)
	}
	defer iter.Close()
	return iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference {
			return nil
		}
		if ref.Hash().IsZero() {
			return fmt.Errorf("%w: ref %s is empty", ErrDamaged, ref.Name())
		}
		c, err := object.GetCommit(g.Storer, ref.Hash())
		if err != nil {
			return fmt.Errorf("%w: ref %s points to an unreadable commit: %v", ErrDamaged, ref.Name(), err)
		}
		if err := verifyTree(g.Storer, c.TreeHash, "", readBlobs, map[plumbing.Hash]bool{}); err != nil {
			return fmt.Errorf("%w: ref %s: %v", ErrDamaged, ref.Name(), err)
		}
		return nil
	})
}

// verifyTree checks the tree h at dir, and what it holds, once per object (seen).
func verifyTree(s storer.EncodedObjectStorer, h plumbing.Hash, dir string, readBlobs bool, seen map[plumbing.Hash]bool) error {
	seen[h] = true
	tree, err := object.GetTree(s, h)
	if err != nil {
		return fmt.Errorf("unreadable tree %s: %v", describeDir(dir), err)
	}
	for _, e := range tree.Entries {
		if seen[e.Hash] || e.Mode == filemode.Submodule {
			continue
		}
		p := path.Join(dir, e.Name)
		if e.Mode == filemode.Dir {
			if err := verifyTree(s, e.Hash, p, readBlobs, seen); err != nil {
				return err
			}
			continue
		}
		if !readBlobs {
			continue
		}
		seen[e.Hash] = true
		if err := verifyBlob(s, e.Hash); err != nil {
			return fmt.Errorf("unreadable blob of %s: %v", p, err)
		}
	}
	return nil
}

// verifyBlob checks that blob h is present and decompresses in full.
func verifyBlob(s storer.EncodedObjectStorer, h plumbing.Hash) error {
	o, err := s.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return err
	}
	rd, err := o.Reader()
	if err != nil {
		return err
	}
	defer func() { _ = rd.Close() }()
	_, err = io.Copy(io.Discard, rd)
	return err
}

// describeDir names a tree's directory in a message ("the root tree" for "").
func describeDir(dir string) string {
	if dir == "" {
		return "the root tree"
	}
	return "of " + dir
}

// reinit deletes dir and creates an empty bare repository in its place. It
// refuses to delete anything that does not look like a bare repository. The
// clone is first renamed aside, in one step, and deleted there: a kill part-way
// leaves either the old clone or none, never a half-deleted directory that no
// longer looks like a repository (and so could never be repaired again).
func reinit(dir string) (*git.Repository, error) {
	if err := removeClone(dir); err != nil {
		return nil, err
	}
	if _, err := git.PlainInit(dir, true); err != nil {
		return nil, fmt.Errorf("init clone: %w", err)
	}
	g, err := openStore(dir)
	if err != nil {
		return nil, fmt.Errorf("open new clone: %w", err)
	}
	return g, nil
}

// removeClone deletes the clone in dir (missing is fine), refusing a directory that is not
// a bare repository. It is moved aside first, so a kill part-way leaves either the whole
// clone or a leftover that the next Open of dir clears.
func removeClone(dir string) error {
	aside, err := MoveAside(dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("remove clone: %w", err)
	}
	return nil
}

// MoveAside moves the clone in dir to the name a deletion uses (CloneOfRemoval), so that
// dir is free at once and the slow part, os.RemoveAll of the returned directory, can run
// later without holding anything; a kill in between leaves what the next Open of dir, or a
// sweep, clears. It refuses a dir that is not a bare repository (checkRemovable); a missing
// dir is fine.
func MoveAside(dir string) (string, error) {
	if err := checkRemovable(dir); err != nil {
		return "", err
	}
	aside := dir + removingSuffix
	if err := os.RemoveAll(aside); err != nil { // left by an earlier kill
		return "", fmt.Errorf("remove %s: %w", aside, err)
	}
	if err := os.Rename(dir, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("move clone aside: %w", err)
	}
	return aside, nil
}

// removingSuffix names a clone being deleted (see removeClone).
const removingSuffix = ".removing"

// CheckLeftover reports whether a deletion of the clone in dir that a kill cut short left
// something behind (the directory MoveAside moves it to), and refuses to treat that as a
// clone's when it holds a work tree: a half-deleted clone may have lost the entries that
// make it look like a bare repository, but it never had a .git.
func CheckLeftover(dir string) (bool, error) {
	aside := dir + removingSuffix
	if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if _, err := os.Lstat(filepath.Join(aside, ".git")); err == nil {
		return true, fmt.Errorf("%w: %s has a .git directory (a work tree?)", ErrNotRepository, aside)
	}
	return true, nil
}

// CloneOfRemoval returns the name of the clone whose deletion a kill interrupted, leaving
// the directory name behind (removeClone moves a clone aside first), and true; for any
// other name, name itself and false. RemoveDir of that clone finishes the deletion.
func CloneOfRemoval(name string) (string, bool) {
	return strings.CutSuffix(name, removingSuffix)
}

// checkRemovable guards against deleting a directory that is not a clone of
// ours, such as a work tree or a wrong --work-dir: it must be a bare
// repository layout (HEAD, objects, refs or config at the top, no .git).
func checkRemovable(dir string) error {
	if filepath.Dir(dir) == dir {
		return fmt.Errorf("%w: refusing to remove %s", ErrNotRepository, dir)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", dir, err)
	}
	return classifyEntries(dir, entries)
}

// classifyEntries decides from a directory listing whether it is a bare
// repository layout.
func classifyEntries(dir string, entries []os.DirEntry) error {
	gitLike := len(entries) == 0
	for _, e := range entries {
		switch e.Name() {
		case ".git":
			return fmt.Errorf("%w: %s has a .git directory (a work tree?)", ErrNotRepository, dir)
		case "HEAD", "objects", "refs", "config", "packed-refs", "shallow":
			gitLike = true
		}
	}
	if !gitLike {
		return fmt.Errorf("%w: %s", ErrNotRepository, dir)
	}
	return nil
}

// ensureRemote makes "origin" point to url with the conventional fetch
// refspec, writing the config only when it differs.
func ensureRemote(g *git.Repository, url string) error {
	cfg, err := g.Config()
	if err != nil {
		return err
	}
	want := &config.RemoteConfig{
		Name:  remoteName,
		URLs:  []string{url},
		Fetch: []config.RefSpec{config.RefSpec("+refs/heads/*:refs/remotes/" + remoteName + "/*")},
	}
	if have, ok := cfg.Remotes[remoteName]; ok && len(have.URLs) == 1 && have.URLs[0] == url {
		return nil
	}
	cfg.Remotes[remoteName] = want
	return g.SetConfig(cfg)
}

// trackingRef is where the last known remote tip of branch is kept.
func trackingRef(branch string) plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(remoteName, branch)
}
