package repo

import (
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// ActAs makes the next fetches and pushes use auth, and their errors name url: a rotated
// Secret takes effect without re-opening the clone, and each target sharing it (one clone
// per repository, whatever its address's SSH user or form) reads its own address in an
// error, not another tenant's. The remote dialled stays the clone's; url names the same
// repository. An empty url keeps the address errors name.
func (r *Repo) ActAs(url string, auth transport.AuthMethod) {
	shown := r.url
	if url != "" {
		shown, auth = splitCredentials(url, auth)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.auth, r.shown = auth, shown
}

// ReadFile returns one regular file's content at commit, walking only the trees on its
// path. A missing file (or a ZeroHash commit) is not an error: found is false.
func (r *Repo) ReadFile(commit plumbing.Hash, p string) (content []byte, found bool, err error) {
	return r.TreeReader(commit).ReadFile(p)
}

// TreeReader reads files of one commit, decoding each directory's tree once, so planning
// many files of one folder costs one decode per directory rather than one per file.
type TreeReader struct {
	r      *Repo
	commit plumbing.Hash
	dirs   map[string]*object.Tree
}

// TreeReader returns a reader for commit (ZeroHash reads as an empty tree).
func (r *Repo) TreeReader(commit plumbing.Hash) *TreeReader {
	return &TreeReader{r: r, commit: commit, dirs: map[string]*object.Tree{}}
}

// ReadFile is Repo.ReadFile through the reader's directory cache.
func (t *TreeReader) ReadFile(p string) (content []byte, found bool, err error) {
	if t.commit.IsZero() {
		return nil, false, nil
	}
	if err := validatePath(p); err != nil {
		return nil, false, err
	}
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	if err := t.r.storeFresh(); err != nil {
		return nil, false, err
	}
	dir, name := path.Split(p)
	tree, err := t.dir(strings.TrimSuffix(dir, "/"))
	if err != nil || tree == nil {
		return nil, false, err
	}
	e := findEntry(tree.Entries, name)
	if e == nil {
		return nil, false, nil
	}
	if e.Mode != filemode.Regular && e.Mode != filemode.Executable && e.Mode != filemode.Deprecated {
		return nil, false, fmt.Errorf("read %s: not a regular file in Git (mode %s): %w", p, e.Mode, ErrPathConflict)
	}
	b, err := t.r.blob(e.Hash)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// dir returns the tree of directory d ("" is the root), nil when it does not exist.
// Callers hold t.r.mu.
func (t *TreeReader) dir(d string) (*object.Tree, error) {
	if tree, ok := t.dirs[d]; ok {
		return tree, nil
	}
	var tree *object.Tree
	var err error
	if d == "" {
		tree, err = t.r.commitTree(t.commit)
	} else {
		parent, name := path.Split(d)
		var up *object.Tree
		if up, err = t.dir(strings.TrimSuffix(parent, "/")); err != nil || up == nil {
			return nil, err
		}
		tree, err = t.r.subtree(up, name)
	}
	if err != nil {
		return nil, err
	}
	t.dirs[d] = tree
	return tree, nil
}
