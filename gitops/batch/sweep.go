package batch

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// Clone names the (repository URL, branch) a GitTarget writes to, whose local clone
// SweepClones keeps.
type Clone struct {
	URL, Branch string
}

// SweepClones deletes from the work directory the clones no GitTarget uses: those of
// targets deleted, or moved to another GitProvider's repository, while the operator was not
// running (retireIfIdle deletes the others as it happens), and what a kill left of a
// deletion. inUse are the repository and branch of every GitTarget in the cluster. The
// clone of a worker, of a registration in progress or of a registered or suspended target
// is kept whatever inUse says. A directory whose name is not one the Manager gives a clone
// is never touched; one that is not a bare repository (repo.MoveAside), or a leftover
// holding a work tree (repo.CheckLeftover), is refused by name. Under the Manager's lock it
// only decides and moves clones aside, so no registration opens a clone being deleted and
// none waits for the deletion, which follows without the lock. It returns the clones it
// deleted.
func (m *Manager) SweepClones(inUse []Clone) ([]string, error) {
	entries, err := os.ReadDir(m.opts.WorkDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the work directory: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	removed, asides, errs := m.moveStaleAside(names, inUse)
	for _, aside := range asides {
		if err := os.RemoveAll(aside); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s: %w", aside, err))
		}
	}
	return removed, errors.Join(errs...)
}

// moveStaleAside moves the stale clones among names aside (repo.MoveAside), with the
// Manager's lock held, and returns their names, the directories to delete and what it
// refused.
func (m *Manager) moveStaleAside(names []string, inUse []Clone) (removed, asides []string, errs []error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range staleClones(names, m.keptClones(inUse)) {
		dir := filepath.Join(m.opts.WorkDir, name)
		leftover, err := repo.CheckLeftover(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) && !leftover {
			continue // a retirement deleted it since the listing
		}
		aside, err := repo.MoveAside(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		removed, asides = append(removed, name), append(asides, aside)
	}
	return removed, asides, errs
}

// keptClones are the directory names of the clones of inUse and of every clone the
// Manager has open, is opening, is closing or keeps for a suspended target. Callers hold
// m.mu.
func (m *Manager) keptClones(inUse []Clone) map[string]bool {
	keep := map[string]bool{}
	add := func(wk workerKey) { keep[filepath.Base(m.cloneDir(wk))] = true }
	for _, c := range inUse {
		add(workerKey{url: repo.NormalizeURL(c.URL), branch: c.Branch})
	}
	for wk := range m.workers {
		add(wk)
	}
	for wk := range m.joining {
		add(wk)
	}
	for wk := range m.retiring {
		add(wk)
	}
	for _, wk := range m.home {
		add(wk)
	}
	return keep
}

// staleClones picks, from the names of the work directory's subdirectories, the clones
// to delete: a clone's name (cloneDir's) that keep lacks, and the clone of a deletion a
// kill interrupted when keep lacks that clone (moveStaleAside finishes it). Anything else
// is not the Manager's and stays. The result is sorted and holds each clone once.
func staleClones(names []string, keep map[string]bool) []string {
	var out []string
	for _, name := range names {
		clone, _ := repo.CloneOfRemoval(name)
		if isCloneName(clone) && !keep[clone] && !slices.Contains(out, clone) {
			out = append(out, clone)
		}
	}
	slices.Sort(out)
	return out
}

// isCloneName reports whether name is one cloneDir gives: 16 lowercase hex digits.
func isCloneName(name string) bool {
	if len(name) != 16 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil && name == strings.ToLower(name)
}
