package repo

import (
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
)

// looseLimit is the most objects a commit stores as loose files; more go into one
// packfile. A loose object costs a temporary file, a write and a rename: the 10,000 blobs of
// an initial snapshot took 3 s that way on this project's 2-core machine, mostly in
// open/rename syscalls, against one sequential pack write.
const looseLimit = 64

// objectBuffer holds the objects one commit creates in memory, reading through to the
// clone for everything else, and stores them in one go when the commit is complete: loose
// for a handful, one packfile (with its index) for many. A failed commit leaves nothing
// behind.
type objectBuffer struct {
	storer.EncodedObjectStorer
	mem   *memory.Storage
	order []plumbing.Hash
	// stored says flush has put the objects into the clone.
	stored bool
	// pack is the packfile of exactly these objects a push sent (Repo.keepsPack), which
	// flush stores as it is; nil when there is none.
	pack []byte
}

func newObjectBuffer(base storer.EncodedObjectStorer) *objectBuffer {
	return &objectBuffer{EncodedObjectStorer: base, mem: memory.NewStorage()}
}

// SetEncodedObject keeps obj in memory until flush.
func (b *objectBuffer) SetEncodedObject(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	h := obj.Hash()
	if b.mem.HasEncodedObject(h) == nil {
		return h, nil
	}
	if _, err := b.mem.SetEncodedObject(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	b.order = append(b.order, h)
	return h, nil
}

// EncodedObject finds an object in memory first, then in the clone.
func (b *objectBuffer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if obj, err := b.mem.EncodedObject(t, h); err == nil {
		return obj, nil
	}
	return b.EncodedObjectStorer.EncodedObject(t, h)
}

// HasEncodedObject reports an object held in memory or by the clone.
func (b *objectBuffer) HasEncodedObject(h plumbing.Hash) error {
	if b.mem.HasEncodedObject(h) == nil {
		return nil
	}
	return b.EncodedObjectStorer.HasEncodedObject(h)
}

// flush stores the buffered objects in the clone in dir and says how many it stored loose.
func (b *objectBuffer) flush(dir string) (loose int, err error) {
	pw, packable := b.EncodedObjectStorer.(storer.PackfileWriter)
	if len(b.order) <= looseLimit || !packable {
		for _, h := range b.order {
			obj, err := b.mem.EncodedObject(plumbing.AnyObject, h)
			if err != nil {
				return loose, err
			}
			if _, err := b.EncodedObjectStorer.SetEncodedObject(obj); err != nil {
				return loose, fmt.Errorf("store object %s: %w", h, err)
			}
			loose++
		}
		return loose, nil
	}
	if b.pack != nil && storePack(pw, b.pack, dir) == nil {
		return 0, nil
	}
	// No pack was sent, or it could not be stored: the objects are still here to encode.
	_, err = writePackfile(pw, b.mem, b.order, dir)
	return 0, err
}

// isExactly reports whether hashes are the buffered objects, each once, and more than
// looseLimit of them (so flush would store them as a pack).
func (b *objectBuffer) isExactly(hashes []plumbing.Hash) bool {
	if len(hashes) != len(b.order) || len(hashes) <= looseLimit {
		return false
	}
	seen := make(map[plumbing.Hash]struct{}, len(hashes))
	for _, h := range hashes {
		if b.mem.HasEncodedObject(h) != nil {
			return false
		}
		seen[h] = struct{}{}
	}
	return len(seen) == len(hashes)
}

// holdsAll reports whether every one of hashes is held in memory.
func (b *objectBuffer) holdsAll(hashes []plumbing.Hash) bool {
	for _, h := range hashes {
		if b.mem.HasEncodedObject(h) != nil {
			return false
		}
	}
	return true
}
