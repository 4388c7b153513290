package repo

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeTree(t *testing.T) {
	tests := []struct {
		name    string
		entries []object.TreeEntry
	}{
		{"encodes the empty tree as go-git does", nil},
		{"encodes files, directories, executables, links and submodules as go-git does", gitSorted(
			fileEntry("a.yaml"), dirEntry("a"), fileEntry("a-b.yaml"), dirEntry("configmaps"),
			object.TreeEntry{Name: "run.sh", Mode: filemode.Executable, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("x"))},
			object.TreeEntry{Name: "link", Mode: filemode.Symlink, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("y"))},
			object.TreeEntry{Name: "sub", Mode: filemode.Submodule, Hash: plumbing.ComputeHash(plumbing.CommitObject, []byte("z"))},
		)},
		{"encodes a wide tree without growing its buffer", namespaceDirs(1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := &plumbing.MemoryObject{}
			require.NoError(t, (&object.Tree{Entries: tt.entries}).Encode(want))

			got, err := encodeTree(tt.entries)
			require.NoError(t, err)

			assert.Equal(t, want.Hash(), got.Hash())
			assert.Equal(t, want.Size(), got.Size())
			assert.Equal(t, plumbing.TreeObject, got.Type())
			assert.Equal(t, encodedTreeSize(tt.entries), cap(got.cont), "the size estimate is an upper bound")
			assert.Equal(t, readAll(t, want), readAll(t, got))
		})
	}
}

func TestEncodeTreeRefusesWhatGoGitRefuses(t *testing.T) {
	tests := []struct {
		name    string
		entries []object.TreeEntry
		want    string
	}{
		{"refuses entries out of tree order", []object.TreeEntry{fileEntry("b"), fileEntry("a")}, "not sorted"},
		{"refuses a directory listed before a file that sorts first, as if the directory's name ended in '/'", []object.TreeEntry{dirEntry("a"), fileEntry("a.yaml")}, "not sorted"},
		{"refuses a name holding a NUL", []object.TreeEntry{fileEntry("a\x00b")}, "malformed file name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Error(t, (&object.Tree{Entries: tt.entries}).Encode(&plumbing.MemoryObject{}), "go-git refuses it too")
			_, err := encodeTree(tt.entries)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// FuzzEncodeTree checks encodeTree against go-git's Tree.Encode, the reference it replaces
// on the commit path: the same bytes for every tree go-git encodes, a refusal wherever go-git
// refuses. The input is a '|'-separated list of entries, each a mode letter (see fuzzMode)
// followed by the name; the entries are put in go-git's tree order unless the input starts
// with '!'. odd is the mode of entries marked '~', to reach modes no Git tree should hold.
// Seeds: testdata/fuzz/FuzzEncodeTree.
func FuzzEncodeTree(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string, odd uint32) {
		unsorted := strings.HasPrefix(in, "!")
		in = strings.TrimPrefix(in, "!")
		var entries []object.TreeEntry
		if in != "" {
			for part := range strings.SplitSeq(in, "|") {
				mode, name := filemode.Regular, part
				if part != "" {
					mode, name = fuzzMode(part[0], odd), part[1:]
				}
				entries = append(entries, object.TreeEntry{Name: name, Mode: mode, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(name))})
			}
		}
		if !unsorted {
			entries = gitSorted(entries...)
		}
		want := &plumbing.MemoryObject{}
		wantErr := (&object.Tree{Entries: entries}).Encode(want)
		got, err := encodeTree(entries)
		if wantErr != nil {
			require.Error(t, err, "go-git refused: %v", wantErr)
			return
		}
		require.NoError(t, err)
		assert.Equal(t, readAll(t, want), readAll(t, got))
		assert.Equal(t, want.Hash(), got.Hash())
	})
}

// fuzzMode reads an entry's mode letter: d directory, f file, x executable, l symlink,
// s submodule, o the deprecated 0100664, ~ odd; any other byte picks one of these.
func fuzzMode(letter byte, odd uint32) filemode.FileMode {
	modes := map[byte]filemode.FileMode{'d': filemode.Dir, 'f': filemode.Regular, 'x': filemode.Executable,
		'l': filemode.Symlink, 's': filemode.Submodule, 'o': filemode.Deprecated, '~': filemode.FileMode(odd)}
	if m, ok := modes[letter]; ok {
		return m
	}
	return modes["dfxlso~"[int(letter)%7]]
}

func readAll(t *testing.T, o plumbing.EncodedObject) []byte {
	t.Helper()
	r, err := o.Reader()
	require.NoError(t, err)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return b
}

func namespaceDirs(n int) []object.TreeEntry {
	es := make([]object.TreeEntry, 0, n)
	for i := range n {
		es = append(es, dirEntry(fmt.Sprintf("ns-%04d", i)))
	}
	return gitSorted(es...)
}

// BenchmarkWideTree separates what writing the tree that lists 1,000 namespaces costs on
// every commit: encoding it (ours, and go-git's Tree.Encode it replaces), and hashing the
// encoded bytes (what any Git writer pays).
func BenchmarkWideTree(b *testing.B) {
	entries := namespaceDirs(1000)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeTree(entries); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode-go-git", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj := newSizedObject(encodedTreeSize(entries))
			if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	encoded, err := encodeTree(entries)
	require.NoError(b, err)
	b.Run("hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = plumbing.ComputeHash(plumbing.TreeObject, encoded.cont)
		}
	})
}
