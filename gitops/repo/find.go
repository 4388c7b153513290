package repo

import (
	"fmt"
	"path"
	"slices"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// FileFinder finds the regular files of some names anywhere in a commit, for checks that
// look across the whole repository rather than one folder (a Kustomize file elsewhere that
// reaches into a GitTarget's folder). Each directory's result is remembered by its tree's
// hash (trees are immutable) until the search after next, so a search after a commit that
// changed a few directories reads only the trees on their paths, and memory stays bounded
// by the trees of the last two commits searched. It searches the whole tree, so that every
// GitTarget of a branch shares what it remembers.
type FileFinder struct {
	names map[string]bool
	mu    sync.Mutex
	// last and cur map a tree to the matching files below it, relative to it; a search
	// takes from last what it meets again, so entries of trees gone from the repository
	// are dropped after one search.
	last, cur map[plumbing.Hash][]string
}

// NewFileFinder returns a finder of the regular files named one of names.
func NewFileFinder(names ...string) *FileFinder {
	f := &FileFinder{names: map[string]bool{}, cur: map[plumbing.Hash][]string{}}
	for _, n := range names {
		f.names[n] = true
	}
	return f
}

// FindFiles lists, in path order, the regular and executable files at commit that f looks
// for. A zero commit has none.
func (r *Repo) FindFiles(f *FileFinder, commit plumbing.Hash) ([]string, error) {
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
	f.last, f.cur = f.cur, map[plumbing.Hash][]string{}
	found, err := r.findIn(f, c.TreeHash, "")
	if err != nil {
		return nil, fmt.Errorf("searching %s: %w", commit, err)
	}
	found = slices.Clone(found) // a remembered slice is never handed out
	slices.Sort(found)
	return found, nil
}

// findIn returns the files f looks for below the tree h (directory dir), relative to it.
// A tree remembered is not even read. Callers hold r.mu and f.mu.
func (r *Repo) findIn(f *FileFinder, h plumbing.Hash, dir string) ([]string, error) {
	if found, ok := f.cur[h]; ok {
		return found, nil
	}
	if found, ok := f.last[h]; ok {
		f.cur[h] = found
		return found, nil
	}
	tree, err := r.tree(h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", dir, err)
	}
	var found []string
	for _, e := range tree.Entries {
		switch {
		case e.Mode == filemode.Dir:
			below, err := r.findIn(f, e.Hash, path.Join(dir, e.Name))
			if err != nil {
				return nil, err
			}
			for _, b := range below {
				found = append(found, e.Name+"/"+b)
			}
		case f.names[e.Name] && (e.Mode == filemode.Regular || e.Mode == filemode.Executable || e.Mode == filemode.Deprecated):
			found = append(found, e.Name)
		}
	}
	f.cur[h] = found
	return found, nil
}
