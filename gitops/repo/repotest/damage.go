package repotest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// DamageObject damages a bare clone (the product's, in dir) the way a disk fault or a kill
// during compaction can: it stores every object as a loose object, drops the packfiles, and
// then deletes the loose object of the entry at path in the tree of
// refs/remotes/origin/<branch>, or, with garble, writes garble over it instead. The clone's
// refs are left as they are.
func DamageObject(t testing.TB, dir, branch, path string, garble []byte) {
	t.Helper()
	g, err := git.PlainOpen(dir)
	must(t, err)
	objs, err := g.Storer.IterEncodedObjects(plumbing.AnyObject)
	must(t, err)
	var all []plumbing.EncodedObject
	must(t, objs.ForEach(func(o plumbing.EncodedObject) error { all = append(all, o); return nil }))
	ref, err := g.Storer.Reference(plumbing.NewRemoteReferenceName("origin", branch))
	must(t, err)
	c, err := g.CommitObject(ref.Hash())
	must(t, err)
	tree, err := c.Tree()
	must(t, err)
	e, err := tree.FindEntry(path)
	must(t, err)
	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*"))
	must(t, err)
	loose := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault())
	for _, o := range all {
		_, err := loose.SetEncodedObject(o)
		must(t, err)
	}
	for _, p := range packs {
		must(t, os.Remove(p))
	}
	hex := e.Hash.String()
	file := filepath.Join(dir, "objects", hex[:2], hex[2:])
	if garble == nil {
		must(t, os.Remove(file))
		return
	}
	must(t, os.Chmod(file, 0o644))
	must(t, os.WriteFile(file, garble, 0o644))
}

// must fails t on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
