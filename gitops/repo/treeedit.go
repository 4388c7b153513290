package repo

import (
	"cmp"
	"slices"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// treeEdit is the entry list of one directory being rewritten. A commit usually changes
// one entry of each tree on its path, and some of those trees are wide (a folder listing
// 1,000 namespaces), so the edit finds names by binary search in Git's order and shares the
// decoded tree's entries until it changes one: the cost is a search and one copy, not a map
// of every name.
type treeEdit struct {
	entries []object.TreeEntry // in Git's tree order, unless unsorted
	shared  bool               // entries belong to a decoded tree; copy before writing
	// unsorted is set, on the first name not found, for a tree some other tool wrote out of
	// Git's order (git fsck calls that an error): names are then found by scanning, and the
	// result is sorted, rather than a name being added twice. checked says it was looked at.
	unsorted, checked bool
	added             []object.TreeEntry // new names, in no particular order
	deleted           map[int]bool
	changed           bool
}

// editOf starts an edit of entries (in Git's tree order), which it will not modify.
func editOf(entries []object.TreeEntry) *treeEdit {
	return &treeEdit{entries: entries, shared: true}
}

// find returns the index of the entry called name, file or directory.
func (ed *treeEdit) find(name string) (int, bool) {
	if ed.unsorted {
		return ed.scan(name)
	}
	for _, dir := range []bool{false, true} {
		i, ok := slices.BinarySearchFunc(ed.entries, name, func(e object.TreeEntry, name string) int {
			return compareInTreeOrder(e.Name, e.Mode == filemode.Dir, name, dir)
		})
		if ok && ed.entries[i].Name == name { // "x/" as a file key would match directory x
			return i, true
		}
	}
	if !ed.checked { // a miss is only trusted in a sorted tree
		ed.checked, ed.unsorted = true, !slices.IsSortedFunc(ed.entries, inTreeOrder)
		if ed.unsorted {
			return ed.scan(name)
		}
	}
	return 0, false
}

// scan finds name entry by entry.
func (ed *treeEdit) scan(name string) (int, bool) {
	for i := range ed.entries {
		if ed.entries[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

// set adds or replaces an entry, noting whether anything changed. A replaced entry keeps
// its name and kind (the caller refuses a file replacing a directory), hence its place.
func (ed *treeEdit) set(e object.TreeEntry) {
	i, ok := ed.find(e.Name)
	if !ok {
		ed.added = append(ed.added, e)
		ed.changed = true
		return
	}
	if ed.entries[i] == e {
		return
	}
	if ed.shared {
		ed.entries, ed.shared = slices.Clone(ed.entries), false
	}
	ed.entries[i], ed.changed = e, true
}

// remove deletes the entry at i.
func (ed *treeEdit) remove(i int) {
	if ed.deleted == nil {
		ed.deleted = map[int]bool{}
	}
	ed.deleted[i], ed.changed = true, true
}

// result returns the surviving entries in Git's tree order.
func (ed *treeEdit) result() []object.TreeEntry {
	if !ed.shared && len(ed.deleted) == 0 && len(ed.added) == 0 && !ed.unsorted {
		return ed.entries // already this edit's own copy
	}
	out := make([]object.TreeEntry, 0, len(ed.entries)-len(ed.deleted)+len(ed.added))
	for i, e := range ed.entries {
		if !ed.deleted[i] {
			out = append(out, e)
		}
	}
	if len(ed.added) > 0 || ed.unsorted {
		out = append(out, ed.added...)
		slices.SortFunc(out, inTreeOrder)
	}
	return out
}

// inTreeOrder compares two entries in Git's tree order.
func inTreeOrder(a, b object.TreeEntry) int {
	return compareInTreeOrder(a.Name, a.Mode == filemode.Dir, b.Name, b.Mode == filemode.Dir)
}

// compareInTreeOrder compares two entry names the way Git orders a tree: bytewise, with a
// directory's name read as if it ended in "/". It builds no strings, since it runs for
// every comparison of a search or sort.
func compareInTreeOrder(a string, aDir bool, b string, bDir bool) int {
	la, lb := sortLen(a, aDir), sortLen(b, bDir)
	for i := range min(la, lb) {
		if c := cmp.Compare(sortByte(a, i), sortByte(b, i)); c != 0 {
			return c
		}
	}
	return cmp.Compare(la, lb)
}

// sortLen is the length of a name in tree order: one more for a directory's "/".
func sortLen(name string, dir bool) int {
	if dir {
		return len(name) + 1
	}
	return len(name)
}

// sortByte is byte i of a name in tree order, where the byte after a directory's name is "/".
func sortByte(name string, i int) byte {
	if i < len(name) {
		return name[i]
	}
	return '/'
}
