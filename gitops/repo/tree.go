package repo

import (
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// EntryKind is what a tree entry is, so callers can refuse to edit what they
// must not treat as a manifest (symlinks, submodules).
type EntryKind int

// Entry kinds, from Git file modes.
const (
	// Regular is a normal file (mode 100644, or the legacy 100664).
	Regular EntryKind = iota
	// Executable is a file with the executable bit (mode 100755).
	Executable
	// Symlink is a symbolic link (mode 120000); its target is not read.
	Symlink
	// Submodule is a gitlink (mode 160000): a commit of another repository.
	Submodule
)

// String names the kind for logs and messages.
func (k EntryKind) String() string {
	switch k {
	case Regular:
		return "regular"
	case Executable:
		return "executable"
	case Symlink:
		return "symlink"
	case Submodule:
		return "submodule"
	default:
		return fmt.Sprintf("EntryKind(%d)", int(k))
	}
}

// File is one non-directory entry of a tree.
type File struct {
	// Path is relative to the repository root, slash-separated.
	Path string
	// Kind tells how Git stores the entry.
	Kind EntryKind
	// Content is the blob for Regular and Executable files, nil otherwise.
	Content []byte
	// Hash names the entry's object (its blob for files), so a caller can tell a file
	// did not change since it last read it without comparing contents.
	Hash plumbing.Hash
}

// ReadTree returns every file under folder at commit, recursively, in Git tree
// order, so the caller can build its index of the folder. A zero commit or a
// missing folder gives an empty list; "" or "." means the whole tree. A folder
// that is a file is ErrPathConflict.
func (r *Repo) ReadTree(commit plumbing.Hash, folder string) ([]File, error) {
	folder, err := cleanFolder(folder)
	if err != nil {
		return nil, err
	}
	if commit.IsZero() {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.storeFresh(); err != nil {
		return nil, err
	}
	tree, err := r.commitTree(commit)
	if err != nil {
		return nil, err
	}
	tree, err = r.subtree(tree, folder)
	if err != nil || tree == nil {
		return nil, err
	}
	var files []File
	if err := r.collect(tree, folder, &files); err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", folder, commit, err)
	}
	return files, nil
}

// FolderHash returns the hash of folder's tree at commit, the zero hash when the commit is
// zero or the folder missing: equal hashes mean every file under folder is the same, so a
// caller that read it at one commit need not read it again at the other. A folder that is
// a file is ErrPathConflict; a commit the clone lacks is an error.
func (r *Repo) FolderHash(commit plumbing.Hash, folder string) (plumbing.Hash, error) {
	folder, err := cleanFolder(folder)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if commit.IsZero() {
		return plumbing.ZeroHash, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.storeFresh(); err != nil {
		return plumbing.ZeroHash, err
	}
	tree, err := r.commitTree(commit)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if tree, err = r.subtree(tree, folder); err != nil || tree == nil {
		return plumbing.ZeroHash, err
	}
	return tree.Hash, nil
}

// commitTree loads the root tree of commit.
func (r *Repo) commitTree(commit plumbing.Hash) (*object.Tree, error) {
	c, err := object.GetCommit(r.git.Storer, commit)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", commit, err)
	}
	t, err := r.tree(c.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("read tree of commit %s: %w", commit, err)
	}
	return t, nil
}

// subtree walks down folder one segment at a time; nil when it is missing.
func (r *Repo) subtree(tree *object.Tree, folder string) (*object.Tree, error) {
	for _, name := range splitPath(folder) {
		e := findEntry(tree.Entries, name)
		if e == nil {
			return nil, nil
		}
		if e.Mode != filemode.Dir {
			return nil, fmt.Errorf("folder %s: %w", folder, ErrPathConflict)
		}
		next, err := r.tree(e.Hash)
		if err != nil {
			return nil, fmt.Errorf("read tree %s: %w", folder, err)
		}
		tree = next
	}
	return tree, nil
}

// collect appends every file of tree (whose path is prefix) to files.
func (r *Repo) collect(tree *object.Tree, prefix string, files *[]File) error {
	for _, e := range tree.Entries {
		p := path.Join(prefix, e.Name)
		if e.Mode == filemode.Dir {
			sub, err := object.GetTree(r.git.Storer, e.Hash)
			if err != nil {
				return fmt.Errorf("read tree %s: %w", p, err)
			}
			if err := r.collect(sub, p, files); err != nil {
				return err
			}
			continue
		}
		f, err := r.file(p, e)
		if err != nil {
			return err
		}
		*files = append(*files, f)
	}
	return nil
}

// file turns a non-directory entry into a File, reading regular blobs.
func (r *Repo) file(p string, e object.TreeEntry) (File, error) {
	kind := kindOf(e.Mode)
	f := File{Path: p, Kind: kind, Hash: e.Hash}
	if kind != Regular && kind != Executable {
		return f, nil
	}
	content, err := r.blob(e.Hash)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", p, err)
	}
	f.Content = content
	return f, nil
}

// blob reads a blob's content.
func (r *Repo) blob(h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(r.git.Storer, h)
	if err != nil {
		return nil, err
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	content, err := io.ReadAll(rd)
	if cerr := rd.Close(); err == nil {
		err = cerr
	}
	return content, err
}

// kindOf maps a Git file mode to an EntryKind.
func kindOf(m filemode.FileMode) EntryKind {
	switch m {
	case filemode.Executable:
		return Executable
	case filemode.Symlink:
		return Symlink
	case filemode.Submodule:
		return Submodule
	default:
		return Regular
	}
}

// findEntry finds name among entries (sorted, but small enough to scan; the
// trees on a changed path are read once per commit).
func findEntry(entries []object.TreeEntry, name string) *object.TreeEntry {
	for i := range entries {
		if entries[i].Name == name {
			return &entries[i]
		}
	}
	return nil
}

// CommitInfo returns the committer time of commit h, for status fields such
// as "last commit time".
func (r *Repo) CommitInfo(h plumbing.Hash) (when time.Time, err error) {
	if h.IsZero() {
		return time.Time{}, errors.New("commit info: zero hash")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.storeFresh(); err != nil {
		return time.Time{}, err
	}
	c, err := object.GetCommit(r.git.Storer, h)
	if err != nil {
		return time.Time{}, fmt.Errorf("read commit %s: %w", h, err)
	}
	return c.Committer.When, nil
}
