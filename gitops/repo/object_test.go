package repo

import (
	"fmt"
	"io"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSizedObject(t *testing.T) {
	tests := []struct {
		name    string
		entries []object.TreeEntry
	}{
		{"stores the empty tree as go-git does", nil},
		{"stores a tree of files and directories as go-git does", gitSorted(
			fileEntry("a.yaml"), dirEntry("a"), fileEntry("a-b.yaml"), dirEntry("configmaps"),
			object.TreeEntry{Name: "run.sh", Mode: filemode.Executable, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("x"))},
			object.TreeEntry{Name: "link", Mode: filemode.Symlink, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("y"))},
			object.TreeEntry{Name: "sub", Mode: filemode.Submodule, Hash: plumbing.ComputeHash(plumbing.CommitObject, []byte("z"))},
		)},
		{"stores a wide tree without growing its buffer", namespaceDirs(1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := &plumbing.MemoryObject{}
			require.NoError(t, (&object.Tree{Entries: tt.entries}).Encode(want))

			capacity := encodedTreeSize(tt.entries)
			got := newSizedObject(capacity)
			require.NoError(t, (&object.Tree{Entries: tt.entries}).Encode(got))

			assert.Equal(t, want.Hash(), got.Hash())
			assert.Equal(t, want.Size(), got.Size())
			assert.Equal(t, plumbing.TreeObject, got.Type())
			assert.Equal(t, capacity, cap(got.cont), "the size estimate is an upper bound")
			r, err := got.Reader()
			require.NoError(t, err)
			content, err := io.ReadAll(r)
			require.NoError(t, err)
			wr, err := want.Reader()
			require.NoError(t, err)
			wantContent, err := io.ReadAll(wr)
			require.NoError(t, err)
			assert.Equal(t, wantContent, content)
		})
	}
}

func namespaceDirs(n int) []object.TreeEntry {
	es := make([]object.TreeEntry, 0, n)
	for i := range n {
		es = append(es, dirEntry(fmt.Sprintf("ns-%04d", i)))
	}
	return gitSorted(es...)
}

// BenchmarkWideTree separates what writing the tree that lists 1,000 namespaces costs on
// every commit: go-git's Tree.Encode, and hashing the encoded bytes (what any Git writer
// pays).
func BenchmarkWideTree(b *testing.B) {
	entries := namespaceDirs(1000)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj := newSizedObject(encodedTreeSize(entries))
			if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	encoded := newSizedObject(encodedTreeSize(entries))
	require.NoError(b, (&object.Tree{Entries: entries}).Encode(encoded))
	b.Run("hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = plumbing.ComputeHash(plumbing.TreeObject, encoded.cont)
		}
	})
}
