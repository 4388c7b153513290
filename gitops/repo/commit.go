package repo

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Commit creates a commit on parent (ZeroHash: a root commit) whose tree is
// parent's tree with changes applied: each path gets its content as a regular
// 0644 file, or is deleted when the value is nil (an empty non-nil slice is an
// empty file); directories left empty disappear. Only the trees on changed
// paths are re-encoded and every other tree and blob hash is reused, so the
// cost follows the change, not the repository. Nothing is checked out and no
// ref moves: the commit becomes visible through Push. ErrNoChange means the
// tree would equal the parent's; ErrInvalidPath, ErrPathConflict and
// ErrInvalidSignature reject bad input before anything is written.
func (r *Repo) Commit(parent plumbing.Hash, changes map[string][]byte, author, committer object.Signature, message string) (plumbing.Hash, error) {
	root, err := buildChangeTree(changes)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := validateSignature("author", author); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := validateSignature("committer", committer); err != nil {
		return plumbing.ZeroHash, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.storeFresh(); err != nil { // the previous commit may be this one's parent
		return plumbing.ZeroHash, err
	}
	base, err := r.parentTree(parent)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	buf := newObjectBuffer(r.git.Storer)
	tree, err := newTree(buf, r.trees, base, root)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sha, err := writeCommit(buf, parent, tree, author, committer, message)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r.fresh = buf // stored once pushed, or by the next read of the clone
	return sha, nil
}

// parentTree returns the tree hash of parent, or ZeroHash for no parent.
func (r *Repo) parentTree(parent plumbing.Hash) (plumbing.Hash, error) {
	if parent.IsZero() {
		return plumbing.ZeroHash, nil
	}
	c, err := object.GetCommit(r.git.Storer, parent)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read parent commit %s: %w", parent, err)
	}
	return c.TreeHash, nil
}

// newTree applies the changes to base and returns the new root tree, failing
// with ErrNoChange when it equals base. An emptied repository gets Git's
// empty tree, which is a legal commit tree.
func newTree(s storer.EncodedObjectStorer, trees *treeCache, base plumbing.Hash, root *changeNode) (plumbing.Hash, error) {
	b := treeBuilder{s: s, trees: trees}
	tree, err := b.apply(base, root, "")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if tree == base {
		return plumbing.ZeroHash, ErrNoChange
	}
	if tree.IsZero() {
		if tree, err = b.writeTree(nil); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return tree, nil
}

// writeCommit encodes and stores the commit object.
func writeCommit(s storer.EncodedObjectStorer, parent, tree plumbing.Hash, author, committer object.Signature, message string) (plumbing.Hash, error) {
	c := &object.Commit{
		Author:    author,
		Committer: committer,
		Message:   normalizeMessage(message),
		TreeHash:  tree,
	}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	obj := s.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit: %w", err)
	}
	return h, nil
}

// normalizeMessage ends a non-empty message with a newline, as git does.
func normalizeMessage(m string) string {
	if m == "" || strings.HasSuffix(m, "\n") {
		return m
	}
	return m + "\n"
}

// validateSignature rejects identities that would produce a malformed commit
// header (and fail `git fsck`).
func validateSignature(role string, s object.Signature) error {
	switch {
	case strings.TrimSpace(s.Name) == "":
		return fmt.Errorf("%s: empty name: %w", role, ErrInvalidSignature)
	case strings.ContainsAny(s.Name, "<>\n") || strings.ContainsAny(s.Email, "<>\n"):
		return fmt.Errorf("%s: name or email contains '<', '>' or a newline: %w", role, ErrInvalidSignature)
	case s.When.IsZero():
		return fmt.Errorf("%s: zero time: %w", role, ErrInvalidSignature)
	}
	return nil
}

// changeNode is the set of changes below one directory: files to write
// (nil content: delete) and subdirectories with changes.
type changeNode struct {
	files map[string][]byte
	dirs  map[string]*changeNode
}

func newChangeNode() *changeNode {
	return &changeNode{files: map[string][]byte{}, dirs: map[string]*changeNode{}}
}

// buildChangeTree validates the paths and arranges them by directory, so the
// tree walk visits only directories on changed paths.
func buildChangeTree(changes map[string][]byte) (*changeNode, error) {
	root := newChangeNode()
	for p, content := range changes {
		if err := validatePath(p); err != nil {
			return nil, err
		}
		if err := root.add(p, content); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// add records one change, rejecting a path that is both a file and a
// directory within the same change set.
func (n *changeNode) add(p string, content []byte) error {
	segs := strings.Split(p, "/")
	for _, seg := range segs[:len(segs)-1] {
		if _, isFile := n.files[seg]; isFile {
			return fmt.Errorf("%s: both a file and a directory in one change: %w", p, ErrPathConflict)
		}
		child, ok := n.dirs[seg]
		if !ok {
			child = newChangeNode()
			n.dirs[seg] = child
		}
		n = child
	}
	name := segs[len(segs)-1]
	if _, isDir := n.dirs[name]; isDir {
		return fmt.Errorf("%s: both a file and a directory in one change: %w", p, ErrPathConflict)
	}
	n.files[name] = content
	return nil
}

// treeBuilder writes blobs and trees into the object store.
type treeBuilder struct {
	s storer.EncodedObjectStorer
	// trees caches decoded wide trees: the ones read on the changed paths and the ones
	// written, which the next commit builds on.
	trees *treeCache
}

// apply returns the hash of tree base (ZeroHash: none) with the changes in n
// applied, or ZeroHash when the directory ends up empty. It returns base
// itself when nothing changed, so untouched trees keep their hashes.
func (b *treeBuilder) apply(base plumbing.Hash, n *changeNode, dir string) (plumbing.Hash, error) {
	ed, err := b.load(base, dir)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := b.applyFiles(ed, n, dir); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := b.applyDirs(ed, n, dir); err != nil {
		return plumbing.ZeroHash, err
	}
	if !ed.changed {
		return base, nil
	}
	entries := ed.result()
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	return b.writeTree(entries)
}

// load reads the entries of base (none for ZeroHash). The entries stay shared with the
// decoded tree until the edit changes one.
func (b *treeBuilder) load(base plumbing.Hash, dir string) (*treeEdit, error) {
	if base.IsZero() {
		return editOf(nil), nil
	}
	t, ok := b.trees.get(base)
	if !ok {
		var err error
		if t, err = object.GetTree(b.s, base); err != nil {
			return nil, fmt.Errorf("read tree %q: %w", dir, err)
		}
		b.trees.put(t)
	}
	return editOf(t.Entries), nil
}

// applyFiles writes or deletes the files changed directly in this directory.
func (b *treeBuilder) applyFiles(ed *treeEdit, n *changeNode, dir string) error {
	for name, content := range n.files {
		p := path.Join(dir, name)
		i, exists := ed.find(name)
		if exists && ed.entries[i].Mode == filemode.Dir {
			return fmt.Errorf("%s is a directory: %w", p, ErrPathConflict)
		}
		if content == nil {
			if exists {
				ed.remove(i)
			}
			continue
		}
		h := plumbing.ComputeHash(plumbing.BlobObject, content)
		if !exists || ed.entries[i].Hash != h {
			if err := b.writeBlob(h, content); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
		}
		ed.set(object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
	}
	return nil
}

// applyDirs recurses into the subdirectories that have changes.
func (b *treeBuilder) applyDirs(ed *treeEdit, n *changeNode, dir string) error {
	for name, child := range n.dirs {
		p := path.Join(dir, name)
		sub := plumbing.ZeroHash
		i, exists := ed.find(name)
		if exists {
			if ed.entries[i].Mode != filemode.Dir {
				return fmt.Errorf("%s is not a directory: %w", p, ErrPathConflict)
			}
			sub = ed.entries[i].Hash
		}
		h, err := b.apply(sub, child, p)
		if err != nil {
			return err
		}
		if h.IsZero() {
			if exists {
				ed.remove(i)
			}
			continue
		}
		ed.set(object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	return nil
}

// writeTree stores a tree with entries (in Git order) and returns its hash;
// no entries gives Git's empty tree.
func (b *treeBuilder) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	obj, err := encodeTree(entries)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := b.s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store tree: %w", err)
	}
	b.trees.put(&object.Tree{Hash: h, Entries: entries})
	return h, nil
}

// writeBlob stores content, whose blob hash is h. It does not ask the clone whether it
// already holds the blob: a file whose content did not change is recognised by its entry's
// hash before this is called, and asking costs several filesystem calls per file (a loose
// object path, then every pack index) for the rare content that exists elsewhere in the
// repository, which storing again merely rewrites.
func (b *treeBuilder) writeBlob(h plumbing.Hash, content []byte) error {
	// The hash is known, so storing does not compute it again; the content is copied
	// because the object outlives the caller's buffer until it is flushed after the push.
	obj := &sizedObject{t: plumbing.BlobObject, h: h, cont: bytes.Clone(content)}
	_, err := b.s.SetEncodedObject(obj)
	return err
}
