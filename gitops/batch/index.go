package batch

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// folderIndex maps identities to the documents holding them, and files back to identities,
// so one changed file can be re-indexed without a walk over the folder.
// It is read by admission (Locate) while the worker writes it, hence the lock.
type folderIndex struct {
	mu     sync.RWMutex
	byID   map[manifest.Identity]layout.Location
	byFile map[string][]manifest.Identity
	// blobs names the content each file was indexed from, so the next analysis can reuse
	// what this one parsed for every file that did not change (see reusedParse).
	blobs map[string]plumbing.Hash
	// tip is the commit the index describes; a failed re-analysis leaves it behind the
	// worker's remote tip, and digests are trusted only when they match (unchangedAtTip).
	tip plumbing.Hash
	// folder is the folder it was read from (fixed once built): a target moved to another
	// folder whose re-read failed must not plan, nor tell admission, from the old one.
	folder string
	// encrypted holds the files that are sops files, for admission (Locate): the writer
	// moves a sensitive object's plaintext document, whatever its file's name, into an
	// encrypted file.
	encrypted map[string]bool
	// dirs counts the files under each directory, so admission knows a path the writer
	// cannot put a document at (pathProblem) without reading Git.
	dirs map[string]int
	// namespaced maps an identity without its namespace to the documents of that group,
	// kind and name that have one (namespacedLike): built on first use, then kept in step
	// as files change (setFile), so the folder is scanned once, not after every push.
	namespaced atomic.Pointer[map[manifest.Identity][]manifest.Identity]
}

// sopsFile reports whether content is an encrypted sops file; a file without "sops"
// anywhere cannot be one, and is not parsed.
func sopsFile(content []byte) bool {
	return bytes.Contains(content, []byte("sops")) && encrypt.HoldsEncrypted(content)
}

// isEncrypted reports whether file is a sops file.
func (f *folderIndex) isEncrypted(file string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.encrypted[file]
}

// of reports whether the index was read from folder.
func (f *folderIndex) of(folder string) bool { return f.folder == folder }

// describes returns the commit the index describes.
func (f *folderIndex) describes() plumbing.Hash {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.tip
}

// advance records that the index also describes to, a commit that changed nothing it
// indexes or whose changes it has re-indexed, when it described from.
func (f *folderIndex) advance(from, to plumbing.Hash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tip == from {
		f.tip = to
	}
}

// newFolderIndex builds the index of an analysed folder: ix from layout.Analyze (nil when
// the folder is unsupported), files what it was given.
func newFolderIndex(ix layout.Index, files []repo.File) *folderIndex {
	f := &folderIndex{byID: map[manifest.Identity]layout.Location{}, byFile: map[string][]manifest.Identity{},
		blobs: map[string]plumbing.Hash{}, encrypted: map[string]bool{}, dirs: map[string]int{}}
	for id, loc := range ix {
		f.byID[id] = loc
		f.byFile[loc.File] = append(f.byFile[loc.File], id)
	}
	if ix != nil {
		for _, file := range files {
			f.blobs[file.Path] = file.Hash
			f.countDirs(file.Path, 1)
			if sopsFile(file.Content) {
				f.encrypted[file.Path] = true
			}
		}
	}
	return f
}

// reusedParse returns manifest.Parse's result (its non-empty documents, which is all
// layout.Analyze reads) for file when this index was built from the very blob h, else nil:
// a file without objects, or not seen, is parsed again.
func (f *folderIndex) reusedParse(file string, h plumbing.Hash) []manifest.DocInfo {
	if f == nil {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if seen, ok := f.blobs[file]; !ok || seen != h || len(f.byFile[file]) == 0 {
		return nil
	}
	docs := make([]manifest.DocInfo, 0, len(f.byFile[file]))
	for _, id := range f.byFile[file] {
		loc, ok := f.byID[id]
		if !ok || loc.File != file {
			return nil // the index moved it elsewhere: parse rather than guess
		}
		docs = append(docs, manifest.DocInfo{Index: loc.Doc, Identity: id, Digest: loc.Digest})
	}
	slices.SortFunc(docs, func(a, b manifest.DocInfo) int { return a.Index - b.Index })
	return docs
}

// layoutFiles is what layout.Analyze reads of the files at the remote tip, with the parse of
// every file prev (the index being replaced, or nil) saw with the same content.
func layoutFiles(files []repo.File, prev *folderIndex) []layout.File {
	lf := make([]layout.File, 0, len(files))
	for _, f := range files {
		lf = append(lf, layout.File{Path: f.Path, Kind: layout.EntryKind(f.Kind), Content: f.Content,
			Docs: prev.reusedParse(f.Path, f.Hash)})
	}
	return lf
}

func (f *folderIndex) lookup(id manifest.Identity) (layout.Location, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	loc, ok := f.byID[id]
	return loc, ok
}

// holders lists the identities whose documents live in file.
func (f *folderIndex) holders(file string) []manifest.Identity {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]manifest.Identity(nil), f.byFile[file]...)
}

// hasContent reports whether file is in the folder and not empty, whether or not it holds
// an object (a file of comments only, say): what an encrypted file written there would drop.
func (f *folderIndex) hasContent(file string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h, ok := f.blobs[file]
	return ok && h != plumbing.ComputeHash(plumbing.BlobObject, nil)
}

// setFile re-indexes one file from its new content; nil content means the file is gone.
// docs are the content's documents when the caller has them (manifest.Parse's result),
// else nil and the content is parsed.
func (f *folderIndex) setFile(file string, content []byte, docs []manifest.DocInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	byName := f.namespaced.Load() // kept in step, not rebuilt: a scan of the folder
	for _, id := range f.byFile[file] {
		if f.byID[id].File == file { // not if a commit moved it to a file indexed before this one
			delete(f.byID, id)
			unlistNamespaced(byName, id)
		}
	}
	delete(f.byFile, file)
	_, had := f.blobs[file]
	delete(f.blobs, file)
	delete(f.encrypted, file)
	if content == nil {
		if had {
			f.countDirs(file, -1)
		}
		return nil // gone
	}
	if !had {
		f.countDirs(file, 1)
	}
	f.blobs[file] = plumbing.ComputeHash(plumbing.BlobObject, content)
	if path.Base(file) == encrypt.ConfigFileName {
		return nil // sops configuration, which holds no object
	}
	if docs == nil {
		var err error
		if docs, err = manifest.Parse(content); err != nil {
			return err
		}
	}
	for _, d := range docs {
		if d.Empty {
			continue
		}
		if _, held := f.byID[d.Identity]; !held {
			listNamespaced(byName, d.Identity)
		}
		f.byID[d.Identity] = layout.Location{File: file, Doc: d.Index, Digest: d.Digest}
		f.byFile[file] = append(f.byFile[file], d.Identity)
	}
	if sopsFile(content) {
		if f.encrypted == nil {
			f.encrypted = map[string]bool{}
		}
		f.encrypted[file] = true
	}
	return nil
}

// countDirs adds by to the count of files under each directory on file's path. Callers
// hold f.mu for writing (or own f).
func (f *folderIndex) countDirs(file string, by int) {
	if f.dirs == nil {
		f.dirs = map[string]int{}
	}
	for dir := path.Dir(file); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if f.dirs[dir] += by; f.dirs[dir] <= 0 {
			delete(f.dirs, dir)
		}
	}
}

// pathProblem says why the writer cannot put a document at file, as far as the folder's
// entries tell (the index describes the remote tip): Git holds file under a name the
// writer never reads (repo.ValidPath), file is a directory, or a file is on its way.
// Symbolic links and submodules make the whole folder unsupported (layout.Analyze), so
// none is looked for. "" when nothing stops it. Admission (Locate) and the writer's
// refusal give this reason; f may be nil.
func (f *folderIndex) pathProblem(file string) string {
	if f == nil {
		return ""
	}
	if err := repo.ValidPath(file); err != nil {
		return fmt.Sprintf("%s is named with a backslash, a control character, or a segment such as .git, git~1 or .., which the writer never edits: rename the file in Git", file)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.dirs[file] > 0 {
		return fmt.Sprintf("%s is a directory in Git: rename it, or move what it holds", file)
	}
	for dir := path.Dir(file); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if _, ok := f.blobs[dir]; ok {
			return fmt.Sprintf("%s is a file in Git where %s needs a directory: rename or move it", dir, file)
		}
	}
	return ""
}

func (f *folderIndex) len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.byID)
}

// namespacedLike lists, sorted, the identities of id's group, kind and name with a
// namespace: for a cluster-scoped id, documents that set a namespace it does not have. A
// scan of the folder, made only for an object Git has no document of.
func (f *folderIndex) namespacedLike(id manifest.Identity) []manifest.Identity {
	f.mu.RLock()
	defer f.mu.RUnlock() // held while building, so setFile cannot drop a map older than its change
	byName := f.namespaced.Load()
	if byName == nil {
		built := map[manifest.Identity][]manifest.Identity{}
		for other := range f.byID {
			if other.Namespace != "" {
				bare := other
				bare.Namespace = ""
				built[bare] = append(built[bare], other)
			}
		}
		for _, ids := range built {
			slices.SortFunc(ids, func(a, b manifest.Identity) int { return strings.Compare(a.Namespace, b.Namespace) })
		}
		byName = &built
		f.namespaced.Store(byName)
	}
	return (*byName)[id]
}

// listNamespaced adds id, when it has a namespace, to byName (namespacedLike's map; nil:
// not built yet), in a new slice: one namespacedLike returned may still be read. Callers
// hold f.mu for writing.
func listNamespaced(byName *map[manifest.Identity][]manifest.Identity, id manifest.Identity) {
	if byName == nil || id.Namespace == "" {
		return
	}
	bare := id
	bare.Namespace = ""
	ids := (*byName)[bare]
	at, found := slices.BinarySearchFunc(ids, id, func(a, b manifest.Identity) int { return strings.Compare(a.Namespace, b.Namespace) })
	if !found {
		(*byName)[bare] = slices.Insert(slices.Clone(ids), at, id)
	}
}

// unlistNamespaced removes id from byName, as listNamespaced adds it.
func unlistNamespaced(byName *map[manifest.Identity][]manifest.Identity, id manifest.Identity) {
	if byName == nil || id.Namespace == "" {
		return
	}
	bare := id
	bare.Namespace = ""
	ids := slices.DeleteFunc(slices.Clone((*byName)[bare]), func(other manifest.Identity) bool { return other == id })
	if len(ids) == 0 {
		delete(*byName, bare)
		return
	}
	(*byName)[bare] = ids
}

// identities lists every identity in the folder.
func (f *folderIndex) identities() []manifest.Identity {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]manifest.Identity, 0, len(f.byID))
	for id := range f.byID {
		out = append(out, id)
	}
	return out
}
