package repo

import (
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// SetAuth replaces the credentials used for fetch and push, so a rotated Secret takes
// effect without re-opening the clone.
func (r *Repo) SetAuth(auth transport.AuthMethod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.auth = auth
}

// ReadFile returns one regular file's content at commit, walking only the trees on its
// path. A missing file (or a ZeroHash commit) is not an error: found is false.
func (r *Repo) ReadFile(commit plumbing.Hash, p string) (content []byte, found bool, err error) {
	if commit.IsZero() {
		return nil, false, nil
	}
	if err := validatePath(p); err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	root, err := r.commitTree(commit)
	if err != nil {
		return nil, false, err
	}
	dir, name := path.Split(p)
	tree, err := r.subtree(root, strings.TrimSuffix(dir, "/"))
	if err != nil || tree == nil {
		return nil, false, err
	}
	e := findEntry(tree.Entries, name)
	if e == nil {
		return nil, false, nil
	}
	if e.Mode != filemode.Regular && e.Mode != filemode.Executable && e.Mode != filemode.Deprecated {
		return nil, false, fmt.Errorf("read %s: not a regular file (mode %s)", p, e.Mode)
	}
	b, err := r.blob(e.Hash)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}
