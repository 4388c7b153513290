package repo

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// sizedObject is an in-memory plumbing.EncodedObject whose content buffer is allocated
// once, at a size given up front. plumbing.MemoryObject grows its buffer by appending,
// which for the tree listing 1,000 namespaces (about 40 KB) allocates and copies it a dozen
// times on every commit. It also carries a blob whose hash is already known.
type sizedObject struct {
	t    plumbing.ObjectType
	h    plumbing.Hash
	cont []byte
}

// newSizedObject returns an empty object with room for capacity bytes.
func newSizedObject(capacity int) *sizedObject {
	return &sizedObject{cont: make([]byte, 0, capacity)}
}

// encodeTree encodes a tree with entries (in Git's tree order) the way go-git's
// object.Tree.Encode does: per entry the mode in octal, a space, the name, a NUL and the
// 20-byte hash, with the same two refusals (entries out of order, a name holding a NUL).
// It exists because Tree.Encode formats every entry with fmt.Fprintf, four allocations an
// entry: 0.4-0.5 ms on every commit for the tree that lists 1,000 namespaces, the one cost
// of a commit that grew with the folder (issue 4's benchmark goal (b)). Appending into a
// buffer sized once takes that to 0.1 ms. go-git stays the reference: FuzzEncodeTree checks
// both agree byte for byte, and this goes once go-git's own encoder is as cheap.
func encodeTree(entries []object.TreeEntry) (*sizedObject, error) {
	if !slices.IsSortedFunc(entries, inTreeOrder) {
		return nil, fmt.Errorf("encode tree: %w", object.ErrEntriesNotSorted)
	}
	o := newSizedObject(encodedTreeSize(entries))
	o.t = plumbing.TreeObject
	for i := range entries {
		e := &entries[i]
		if strings.IndexByte(e.Name, 0) >= 0 {
			return nil, fmt.Errorf("encode tree: malformed file name %q", e.Name)
		}
		o.cont = strconv.AppendUint(o.cont, uint64(e.Mode), 8)
		o.cont = append(o.cont, ' ')
		o.cont = append(o.cont, e.Name...)
		o.cont = append(o.cont, 0)
		o.cont = append(o.cont, e.Hash[:]...)
	}
	return o, nil
}

// encodedTreeSize is an upper bound of the encoded size of a tree with entries: per
// entry, the mode (a uint32: at most 11 octal digits), a space, the name, a NUL and the hash.
func encodedTreeSize(entries []object.TreeEntry) int {
	const perEntry = 11 + 1 + 1 + len(plumbing.ZeroHash)
	n := 0
	for i := range entries {
		n += len(entries[i].Name) + perEntry
	}
	return n
}

// Hash returns the object's hash, computed once the content is written.
func (o *sizedObject) Hash() plumbing.Hash {
	if o.h.IsZero() {
		o.h = plumbing.ComputeHash(o.t, o.cont)
	}
	return o.h
}

// Type returns the object type.
func (o *sizedObject) Type() plumbing.ObjectType { return o.t }

// SetType sets the object type.
func (o *sizedObject) SetType(t plumbing.ObjectType) { o.t, o.h = t, plumbing.ZeroHash }

// Size returns the length of the content written so far.
func (o *sizedObject) Size() int64 { return int64(len(o.cont)) }

// SetSize does nothing: the size is the content's length.
func (o *sizedObject) SetSize(int64) {}

// Reader reads the content.
func (o *sizedObject) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.cont)), nil
}

// Writer appends to the content.
func (o *sizedObject) Writer() (io.WriteCloser, error) { return o, nil }

// Write appends p to the content.
func (o *sizedObject) Write(p []byte) (int, error) {
	o.cont, o.h = append(o.cont, p...), plumbing.ZeroHash
	return len(p), nil
}

// Close does nothing.
func (o *sizedObject) Close() error { return nil }
