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
	"k8s.io/apimachinery/pkg/types"
)

// Clone names the (repository URL, branch) a GitTarget writes to, whose local clone
// SweepClones keeps, and the folder whose saved index (savedIndexPath) it keeps there. A
// target with no repository (its GitProvider is missing: URL "") keeps no clone, and the
// saved index of its folder in every clone.
type Clone struct {
	URL, Branch, Folder string
	// Target is the GitTarget: the deletions an earlier process journalled for a target
	// that is in no Clone, nor registered, are dropped (forgetGoneTargets).
	Target types.NamespacedName
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
// none waits for the deletion, which follows without the lock. Then, in the clones it
// kept, it deletes the saved folder indexes no GitTarget writes (sweepIndexes). It returns
// the clones it deleted.
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
	m.forgetGoneTargets(inUse)
	removed, asides, errs := m.moveStaleAside(names, inUse)
	for _, aside := range asides {
		if err := os.RemoveAll(aside); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s: %w", aside, err))
		}
	}
	errs = append(errs, m.sweepIndexes(inUse)...)
	return removed, errors.Join(errs...)
}

// forgetGoneTargets drops the deletions an earlier process journalled for GitTargets deleted
// while no process ran (in no Clone of inUse, nor registered): no snapshot ever takes them,
// and they stayed in memory until the next start, and in the journal for a week.
func (m *Manager) forgetGoneTargets(inUse []Clone) {
	exists := make(map[types.NamespacedName]bool, len(inUse))
	for _, c := range inUse {
		if c.Target.Name == "" {
			return // a list that does not name its targets tells none gone
		}
		exists[c.Target] = true
	}
	var gone []types.NamespacedName
	m.mu.Lock()
	for key := range m.recovered {
		if _, registered := m.known[key]; !exists[key] && !registered {
			gone = append(gone, key)
			delete(m.recovered, key)
		}
	}
	m.mu.Unlock()
	for _, key := range gone {
		m.journal.forgetRecovered(key) // one made again since under that name keeps its own
		m.opts.Log.Info("dropped the deletions an earlier process kept for a GitTarget that no longer exists", "gitTarget", key.String())
	}
}

// sweepIndexes deletes, from the clones of inUse and of the registered targets, the saved
// folder indexes of folders that neither inUse nor a registered target writes there: those
// of targets deleted while suspended or while the operator was down, or that came back
// from a suspension with another folder, repository or branch. The folder of a target with
// no repository (Clone) is kept in every clone, for its return. Nothing else in a clone is
// touched. A target created after inUse was listed and suspended before this sweep loses
// its saved index, which costs its return a parse of its folder, never a wrong verdict.
func (m *Manager) sweepIndexes(inUse []Clone) []error {
	written := m.foldersWritten(inUse)
	anywhere := map[string]bool{}
	for _, c := range inUse {
		if c.URL == "" {
			anywhere[filepath.Base(savedIndexPath("", c.Folder))] = true
		}
	}
	var errs []error
	for dir, folders := range written {
		entries, err := os.ReadDir(filepath.Join(dir, savedIndexDir))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the saved indexes of %s: %w", dir, err))
			continue
		}
		for _, e := range entries {
			if name := strings.TrimSuffix(e.Name(), ".tmp"); !isSavedIndexName(e.Name()) || folders[name] || anywhere[name] {
				continue
			}
			if err := os.Remove(filepath.Join(dir, savedIndexDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("deleting a saved index no GitTarget writes: %w", err))
			}
		}
	}
	return errs
}

// foldersWritten maps the clone of each of inUse (with a repository) and of each
// registered target to the names of the saved indexes of the folders written there, by
// either. Takes m.mu.
func (m *Manager) foldersWritten(inUse []Clone) map[string]map[string]bool {
	written := map[string]map[string]bool{}
	add := func(wk workerKey, folder string) {
		dir := m.cloneDir(wk)
		if written[dir] == nil {
			written[dir] = map[string]bool{}
		}
		written[dir][filepath.Base(savedIndexPath(dir, folder))] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range inUse {
		if c.URL != "" {
			add(workerKey{url: repo.RepositoryKey(c.URL), branch: c.Branch}, c.Folder)
		}
	}
	for key, t := range m.known {
		wk, ok := m.targets[key]
		if folder := t.folderPath.Load(); ok && folder != nil {
			add(wk, *folder)
		}
	}
	return written
}

// isSavedIndexName reports whether name is one savedIndexPath gives, or its temporary file.
func isSavedIndexName(name string) bool {
	digest, ok := strings.CutPrefix(strings.TrimSuffix(name, ".tmp"), "index-")
	digest, json := strings.CutSuffix(digest, ".json")
	return ok && json && isCloneName(digest)
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
		if c.URL != "" {
			add(workerKey{url: repo.RepositoryKey(c.URL), branch: c.Branch})
		}
	}
	for wk := range m.workers {
		add(wk)
	}
	for wk := range m.joining {
		add(wk)
	}
	for wk := range m.opening {
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
