package batch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// savedIndex is a folder index as the worker keeps it in its clone between runs, so that the
// first analysis after a restart parses only the files that changed since (reusedParse)
// instead of every file of the folder (0.4 s of CPU for 10,000 files, BenchmarkReanalyse,
// and proportionally more for larger folders). It is taken only by the same build of the
// operator (Options.IndexKey: a parser that changed could judge a file differently), for
// the same folder, and file by file only for the same blob at the same path: a stale or
// damaged one costs a parse, never a wrong verdict. Sum, a SHA-256 of the files' entries,
// turns a damage that still decodes (a changed name or position) into one that is refused.
type savedIndex struct {
	Key    string      `json:"key"`
	Folder string      `json:"folder"`
	Files  []savedFile `json:"files"`
	Sum    string      `json:"sum"`
}

// savedFile is one indexed file: its blob and the objects its documents define.
type savedFile struct {
	Path string     `json:"path"`
	Blob string     `json:"blob"`
	Docs []savedDoc `json:"docs"`
}

// savedDoc is one document of a savedFile (manifest.DocInfo without Empty: only documents
// defining an object are indexed).
type savedDoc struct {
	Index     int    `json:"index"`
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Digest    string `json:"digest,omitempty"`
}

// savedIndexPath is where the clone in dir keeps the saved index of folder.
func savedIndexPath(dir, folder string) string {
	sum := sha256.Sum256([]byte(folder))
	return filepath.Join(dir, savedIndexDir, "index-"+hex.EncodeToString(sum[:8])+".json")
}

// savedIndexDir is the directory of a clone that holds its saved indexes.
const savedIndexDir = "gitops-reverser"

// saveIndex writes ix, read from folder, for the build key into the clone in dir,
// replacing the earlier one at once (a kill leaves either, or a temporary file the next
// save replaces). It writes nothing unless dir holds a clone: a directory made here would
// hold no repository, and a clone repaired or deleted meanwhile is none.
func saveIndex(dir, key, folder string, ix *folderIndex) error {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		return nil
	}
	s := toSaved(key, folder, ix)
	sum, err := filesSum(s.Files)
	if err != nil {
		return fmt.Errorf("encoding the index of %s: %w", folder, err)
	}
	s.Sum = sum
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding the index of %s: %w", folder, err)
	}
	path := savedIndexPath(dir, folder)
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("saving the index of %s: %w", folder, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("saving the index of %s: %w", folder, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("saving the index of %s: %w", folder, err)
	}
	return nil
}

// loadIndex reads the index the clone in dir saved for the build key and folder; nil when
// there is none, it does not decode, or it is another build's or folder's.
func loadIndex(dir, key, folder string) *folderIndex {
	data, err := os.ReadFile(savedIndexPath(dir, folder))
	if err != nil {
		return nil
	}
	return decodeIndex(data, key, folder)
}

// decodeIndex is the index data saved for the build key and folder; nil when it does not
// decode, does not match its sum, or is another build's or folder's. The data is whatever
// the disk holds: TestASavedIndexIsTakenOnlyWhole checks the sum, and FuzzFromSaved that no
// entries make the index offer a parse they do not say.
func decodeIndex(data []byte, key, folder string) *folderIndex {
	var s savedIndex
	if json.Unmarshal(data, &s) != nil || s.Key != key || s.Folder != folder {
		return nil
	}
	if sum, err := filesSum(s.Files); err != nil || sum != s.Sum {
		return nil
	}
	return fromSaved(s)
}

// filesSum is the SHA-256 of the entries' JSON encoding, hex: what encoding/json gives for
// the same entries does not vary, so a decoded file sums as it was saved.
func filesSum(files []savedFile) (string, error) {
	data, err := json.Marshal(files)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// toSaved is ix as saved: every file with the blob it was indexed from and the objects it
// holds, in path order.
func toSaved(key, folder string, ix *folderIndex) savedIndex {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s := savedIndex{Key: key, Folder: folder, Files: make([]savedFile, 0, len(ix.blobs))}
	for path, blob := range ix.blobs {
		if f, ok := savedFileOf(ix, path, blob); ok {
			s.Files = append(s.Files, f)
		}
	}
	slices.SortFunc(s.Files, func(a, b savedFile) int { return strings.Compare(a.Path, b.Path) })
	return s
}

// savedFileOf is the entry of file path, indexed from blob; not ok, so that the next run
// parses the file, when reusedParse would not reuse it either: an object of it the index
// moved elsewhere, or one listed twice. Callers hold ix.mu.
func savedFileOf(ix *folderIndex, path string, blob plumbing.Hash) (savedFile, bool) {
	f := savedFile{Path: path, Blob: blob.String()}
	seen := map[manifest.Identity]bool{}
	for _, id := range ix.byFile[path] {
		loc, ok := ix.byID[id]
		if !ok || loc.File != path || seen[id] {
			return savedFile{}, false
		}
		seen[id] = true
		d := savedDoc{Index: loc.Doc, Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}
		if loc.Digest != (manifest.Digest{}) {
			d.Digest = hex.EncodeToString(loc.Digest[:])
		}
		f.Docs = append(f.Docs, d)
	}
	slices.SortFunc(f.Docs, func(a, b savedDoc) int { return a.Index - b.Index })
	return f, len(f.Docs) > 0
}

// fromSaved rebuilds the index s saved, for reusedParse only: it describes no commit, so
// no digest of it is trusted for planning. A file whose entry does not decode is left out
// (it is parsed again).
func fromSaved(s savedIndex) *folderIndex {
	ix := &folderIndex{byID: map[manifest.Identity]layout.Location{}, byFile: map[string][]manifest.Identity{},
		blobs: map[string]plumbing.Hash{}, folder: s.Folder}
	paths := make(map[string]int, len(s.Files))
	for _, f := range s.Files {
		paths[f.Path]++
	}
	for _, f := range s.Files {
		blob := plumbing.NewHash(f.Blob)
		if blob.IsZero() || blob.String() != f.Blob || len(f.Docs) == 0 || paths[f.Path] > 1 {
			continue // a path listed twice is not what toSaved writes either: parse the file
		}
		locs := make(map[manifest.Identity]layout.Location, len(f.Docs))
		positions := map[int]bool{}
		for _, d := range f.Docs {
			id := manifest.Identity{Group: d.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
			if _, twice := locs[id]; twice || positions[d.Index] || !parseable(d) {
				locs = nil // not what toSaved writes: parse the file
				break
			}
			positions[d.Index] = true
			var digest manifest.Digest
			if d.Digest != "" {
				b, err := hex.DecodeString(d.Digest)
				if err != nil || len(b) != len(digest) {
					locs = nil
					break
				}
				copy(digest[:], b)
			}
			locs[id] = layout.Location{File: f.Path, Doc: d.Index, Digest: digest}
		}
		for id, loc := range locs {
			ix.byID[id] = loc
			ix.byFile[f.Path] = append(ix.byFile[f.Path], id)
		}
		if len(locs) > 0 {
			ix.blobs[f.Path] = blob
		}
	}
	return ix
}

// parseable reports whether a saved document is one a parse could give: at a position in the
// file, of an object with a kind and a name.
func parseable(d savedDoc) bool {
	return d.Index >= 0 && d.Kind != "" && d.Name != ""
}

// reusable is the index whose parses t's next analysis may reuse: the one it has, else,
// after a restart, the one its worker saved (Options.IndexKey).
func (w *worker) reusable(t *target) *folderIndex {
	if ix := t.index.Load(); ix != nil || w.opts.IndexKey == "" {
		return ix
	}
	return loadIndex(w.repo.Dir(), w.opts.IndexKey, t.spec.Folder)
}

// saveIndexes keeps every target's index in the clone for the next run (Options.IndexKey).
// A failure costs that run a parse of the folder: it is logged, not returned.
func (w *worker) saveIndexes() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, t := range w.targets {
		w.saveIndexOf(key, t)
	}
}

// saveIndexOf keeps the index of target t (key) in the clone, for the next run or for its
// return from a suspension. Callers hold w.mu.
func (w *worker) saveIndexOf(key types.NamespacedName, t *target) {
	if w.opts.IndexKey == "" {
		return
	}
	ix := t.index.Load()
	if ix == nil || !ix.of(t.spec.Folder) {
		return
	}
	if err := saveIndex(w.repo.Dir(), w.opts.IndexKey, t.spec.Folder, ix); err != nil {
		w.log.Error(err, "keeping the folder index in the clone", "gitTarget", key.String())
	}
}

// forgetSavedIndex deletes the saved index of folder once no target of the worker writes
// it (its target left the clone or moved to another folder), so that a clone shared by
// targets that come and go does not keep every index it ever held. Callers hold w.mu.
func (w *worker) forgetSavedIndex(folder string) {
	for _, t := range w.targets {
		if t.spec.Folder == folder {
			return
		}
	}
	if err := os.Remove(savedIndexPath(w.repo.Dir(), folder)); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Error(err, "deleting the saved index of a folder no target writes any more", "path", folder)
	}
}
