package batch

import (
	"path"
	"sync"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// folderIndex maps identities to the documents holding them, and files back to identities,
// so one changed file can be re-indexed without a walk over the folder.
// It is read by admission (Locate) while the worker writes it, hence the lock.
type folderIndex struct {
	mu     sync.RWMutex
	byID   map[manifest.Identity]layout.Location
	byFile map[string][]manifest.Identity
}

func newFolderIndex(ix layout.Index) *folderIndex {
	f := &folderIndex{byID: map[manifest.Identity]layout.Location{}, byFile: map[string][]manifest.Identity{}}
	for id, loc := range ix {
		f.byID[id] = loc
		f.byFile[loc.File] = append(f.byFile[loc.File], id)
	}
	return f
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

// setFile re-indexes one file from its new content; nil content means the file is gone.
func (f *folderIndex) setFile(file string, content []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range f.byFile[file] {
		delete(f.byID, id)
	}
	delete(f.byFile, file)
	if content == nil || path.Base(file) == encrypt.ConfigFileName {
		return nil // gone, or sops configuration, which holds no object
	}
	docs, err := manifest.Parse(content)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if d.Empty {
			continue
		}
		f.byID[d.Identity] = layout.Location{File: file, Doc: d.Index, Digest: d.Digest}
		f.byFile[file] = append(f.byFile[file], d.Identity)
	}
	return nil
}

func (f *folderIndex) len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.byID)
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
