package repo

import (
	"sort"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func dirEntry(name string) object.TreeEntry {
	return object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: plumbing.ComputeHash(plumbing.TreeObject, []byte(name))}
}

func fileEntry(name string) object.TreeEntry {
	return object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(name))}
}

// gitSorted sorts with go-git's own order, the reference compareInTreeOrder must match.
func gitSorted(es ...object.TreeEntry) []object.TreeEntry {
	out := append([]object.TreeEntry(nil), es...)
	sort.Sort(object.TreeEntrySorter(out))
	return out
}

func TestCompareInTreeOrder(t *testing.T) {
	tests := []struct {
		name       string
		a          string
		aDir       bool
		b          string
		bDir       bool
		want       int
		explaining string
	}{
		{name: "equal files are equal", a: "x", b: "x", want: 0},
		{name: "equal directories are equal", a: "x", aDir: true, b: "x", bDir: true, want: 0},
		{name: "a file sorts before the directory of the same name", a: "x", b: "x", bDir: true, want: -1},
		{name: "a directory sorts after a name continuing with a byte below '/'", a: "x", aDir: true, b: "x-a", want: 1},
		{name: "a directory sorts before a name continuing with a byte above '/'", a: "x", aDir: true, b: "x0", want: -1},
		{name: "a prefix sorts first", a: "ns", b: "ns-1", want: -1},
		{name: "bytes compare unsigned", a: "é", b: "z", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, compareInTreeOrder(tt.a, tt.aDir, tt.b, tt.bDir))
			assert.Equal(t, -tt.want, compareInTreeOrder(tt.b, tt.bDir, tt.a, tt.aDir), "reversed")
		})
	}
}

func TestTreeEdit(t *testing.T) {
	base := gitSorted(fileEntry("a.yaml"), dirEntry("ns"), fileEntry("ns-1.yaml"), dirEntry("ns0"), fileEntry("z"))
	changed := fileEntry("a.yaml")
	changed.Hash = plumbing.ComputeHash(plumbing.BlobObject, []byte("new"))

	tests := []struct {
		name    string
		edit    func(ed *treeEdit)
		want    []object.TreeEntry
		changed bool
	}{
		{
			name:    "setting an entry to what it is changes nothing",
			edit:    func(ed *treeEdit) { ed.set(fileEntry("a.yaml")) },
			changed: false,
		},
		{
			name: "replacing an entry keeps its place",
			edit: func(ed *treeEdit) { ed.set(changed) },
			want: gitSorted(changed, dirEntry("ns"), fileEntry("ns-1.yaml"), dirEntry("ns0"), fileEntry("z")), changed: true,
		},
		{
			name: "new names are put in Git's order, a directory after a name with '-'",
			edit: func(ed *treeEdit) { ed.set(dirEntry("ns-0")); ed.set(fileEntry("b")) },
			want: gitSorted(append(append([]object.TreeEntry(nil), base...), dirEntry("ns-0"), fileEntry("b"))...), changed: true,
		},
		{
			name: "a removed entry is left out",
			edit: func(ed *treeEdit) {
				i, ok := ed.find("ns")
				require.True(t, ok)
				ed.remove(i)
			},
			want: gitSorted(fileEntry("a.yaml"), fileEntry("ns-1.yaml"), dirEntry("ns0"), fileEntry("z")), changed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shared := append([]object.TreeEntry(nil), base...)
			ed := editOf(shared)
			tt.edit(ed)
			assert.Equal(t, tt.changed, ed.changed)
			if tt.changed {
				assert.Equal(t, tt.want, ed.result())
			}
			assert.Equal(t, base, shared, "the decoded tree's entries are never modified")
		})
	}
}

func TestTreeEditFindsFilesAndDirectoriesByName(t *testing.T) {
	ed := editOf(gitSorted(fileEntry("a"), dirEntry("b"), fileEntry("b-c"), dirEntry("c")))
	for _, name := range []string{"a", "b", "b-c", "c"} {
		i, ok := ed.find(name)
		require.True(t, ok, name)
		assert.Equal(t, name, ed.entries[i].Name)
	}
	for _, name := range []string{"", "b/", "bb", "d", "0"} {
		_, ok := ed.find(name)
		assert.False(t, ok, "%q is not there", name)
	}
}

func TestCompareInTreeOrderAgreesWithGoGit(t *testing.T) {
	// Names from a small alphabet around '/' (0x2f) collide on prefixes often, which is
	// where a directory's implicit slash decides the order.
	alphabet := []byte{'-', '.', '0', 'a', 'z', 0xc3}
	var entries []object.TreeEntry
	seen := map[string]bool{}
	for i := range 2000 {
		name := []byte{}
		for n := i; ; n /= len(alphabet) {
			name = append(name, alphabet[n%len(alphabet)])
			if n < len(alphabet) {
				break
			}
		}
		if seen[string(name)] {
			continue
		}
		seen[string(name)] = true
		if i%2 == 0 {
			entries = append(entries, dirEntry(string(name)))
		} else {
			entries = append(entries, fileEntry(string(name)))
		}
	}
	want := gitSorted(entries...)

	ed := &treeEdit{added: entries}
	got := ed.result()

	require.Equal(t, want, got)
	assert.True(t, sort.IsSorted(object.TreeEntrySorter(got)))
}

func TestTreeEditRepairsATreeWrittenOutOfOrderInsteadOfDuplicatingAnEntry(t *testing.T) {
	unsorted := []object.TreeEntry{fileEntry("z"), fileEntry("a.yaml"), dirEntry("ns")}
	ed := editOf(unsorted)
	changed := fileEntry("a.yaml")
	changed.Hash = plumbing.ComputeHash(plumbing.BlobObject, []byte("new"))

	ed.set(changed)

	assert.Equal(t, []object.TreeEntry{changed, dirEntry("ns"), fileEntry("z")}, ed.result())
}
