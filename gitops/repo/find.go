package repo

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// FileFinder finds the regular files of some names anywhere in a commit, for checks that
// look across the whole repository rather than one folder (a Kustomize file elsewhere that
// reaches into a GitTarget's folder). Each directory's result is remembered by its tree's
// hash (trees are immutable) from one search to the next, so a search after a commit that
// changed a few directories reads only the trees on their paths, and memory stays bounded
// by the trees of the last two commits searched. It searches the whole tree, so that every
// GitTarget of a branch shares what it remembers.
type FileFinder struct {
	names map[string]bool
	mu    sync.Mutex
	// last and cur hold what was found below each tree: cur the trees of this search, last
	// those of the one before, which this one takes over as it meets them again, so the
	// trees of commits no longer searched are dropped.
	last, cur map[plumbing.Hash]*foundBelow
	// read counts the trees the last search read, for the tests of what it remembers.
	read int
}

// foundBelow is what a FileFinder remembers of one tree.
type foundBelow struct {
	files    []File          // the matching files below the tree, paths relative to it
	subtrees []plumbing.Hash // the tree's directories, taken over with it
}

// NewFileFinder returns a finder of the regular files named one of names.
func NewFileFinder(names ...string) *FileFinder {
	f := &FileFinder{names: map[string]bool{}, cur: map[plumbing.Hash]*foundBelow{}}
	for _, n := range names {
		f.names[n] = true
	}
	return f
}

// FindFiles lists, in path order, the regular and executable files at commit that f looks
// for, with their blobs' hashes but not their content (TreeReader reads it). A zero commit
// has none.
func (r *Repo) FindFiles(f *FileFinder, commit plumbing.Hash) ([]File, error) {
	if commit.IsZero() {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.storeFresh(); err != nil {
		return nil, err
	}
	c, err := object.GetCommit(r.git.Storer, commit)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", commit, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.read = 0
	if _, again := f.cur[c.TreeHash]; !again { // the same tree again: keep what it has
		f.last, f.cur = f.cur, map[plumbing.Hash]*foundBelow{}
	}
	found, err := r.findIn(f, c.TreeHash, "")
	if err != nil {
		return nil, fmt.Errorf("searching %s: %w", commit, err)
	}
	files := slices.Clone(found.files) // a remembered slice is never handed out
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// findIn returns what f finds below the tree h (directory dir). A tree remembered is not
// even read. Callers hold r.mu and f.mu.
func (r *Repo) findIn(f *FileFinder, h plumbing.Hash, dir string) (*foundBelow, error) {
	if found, ok := f.cur[h]; ok {
		return found, nil
	}
	if found, ok := f.last[h]; ok {
		f.takeOver(h, found)
		return found, nil
	}
	tree, err := r.tree(h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", dir, err)
	}
	f.read++
	found := &foundBelow{}
	for _, e := range tree.Entries {
		switch {
		case e.Mode == filemode.Dir:
			below, err := r.findIn(f, e.Hash, path.Join(dir, e.Name))
			if err != nil {
				return nil, err
			}
			found.subtrees = append(found.subtrees, e.Hash)
			for _, b := range below.files {
				b.Path = e.Name + "/" + b.Path
				found.files = append(found.files, b)
			}
		case f.names[e.Name] && (e.Mode == filemode.Regular || e.Mode == filemode.Executable || e.Mode == filemode.Deprecated):
			found.files = append(found.files, File{Path: e.Name, Kind: kindOf(e.Mode), Hash: e.Hash})
		}
	}
	f.cur[h] = found
	return found, nil
}

// takeOver moves tree h, and every tree below it, from the last search into this one, so
// that a later change below it reads only the trees on that change's path. Callers hold
// f.mu.
func (f *FileFinder) takeOver(h plumbing.Hash, found *foundBelow) {
	f.cur[h] = found
	for _, sub := range found.subtrees {
		if _, ok := f.cur[sub]; ok {
			continue
		}
		if below, ok := f.last[sub]; ok {
			f.takeOver(sub, below)
		}
	}
}
