package repo

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errDiskFull stands for ENOSPC, which a test cannot cause on the machine's own disk.
var errDiskFull = errors.New("no space left on device")

// fullingFS is a clone's filesystem whose temporary files take room bytes and then fail
// every write, as a disk that fills up while a packfile is written.
type fullingFS struct {
	billy.Filesystem
	room int
}

func (f fullingFS) TempFile(dir, prefix string) (billy.File, error) {
	file, err := f.Filesystem.TempFile(dir, prefix)
	return &fullingFile{File: file, room: f.room}, err
}

type fullingFile struct {
	billy.File
	room int
}

func (f *fullingFile) Write(p []byte) (int, error) {
	if len(p) > f.room {
		n, _ := f.File.Write(p[:f.room])
		f.room = 0
		return n, errDiskFull
	}
	f.room -= len(p)
	return f.File.Write(p)
}

func TestAPackfileTheDiskCannotHoldLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	_, err := git.PlainInit(dir, true)
	require.NoError(t, err)
	src := memory.NewStorage()
	var hashes []plumbing.Hash
	for range 64 {
		obj := src.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		content := make([]byte, 32<<10) // random: compression keeps it large
		_, _ = rand.Read(content)
		wr, err := obj.Writer()
		require.NoError(t, err)
		_, err = wr.Write(content)
		require.NoError(t, err)
		require.NoError(t, wr.Close())
		h, err := src.SetEncodedObject(obj)
		require.NoError(t, err)
		hashes = append(hashes, h)
	}
	dst := filesystem.NewStorage(fullingFS{Filesystem: osfs.New(dir), room: 256 << 10}, cache.NewObjectLRUDefault())

	_, err = writePackfile(dst, src, hashes, dir)
	require.ErrorIs(t, err, errDiskFull)
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	require.NoError(t, err)
	assert.Empty(t, entries, "no part of the pack is left to fill the disk further at each retry")
}

func TestAKeptPackThatCannotBeStoredIsCompressedAgainFromMemory(t *testing.T) {
	dir := t.TempDir()
	_, err := git.PlainInit(dir, true)
	require.NoError(t, err)
	clone := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault())
	buf := newObjectBuffer(clone)
	addBlobs(t, buf, looseLimit+1)
	buf.pack = []byte("PACK, but not one") // what a bug would keep

	loose, err := buf.flush(dir)
	require.NoError(t, err)
	assert.Zero(t, loose)
	for _, h := range buf.order {
		assert.NoError(t, clone.HasEncodedObject(h), "object %s is in the clone", h)
	}
	temps, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_*"))
	require.NoError(t, err)
	assert.Empty(t, temps, "the pack that failed left nothing behind")
}

// unrenamableFS is a clone's filesystem that cannot rename files, as a disk that fails
// while go-git's writer saves a finished pack (it renames it into place last).
type unrenamableFS struct {
	billy.Filesystem
}

func (unrenamableFS) Rename(_, _ string) error { return errDiskFull }

func TestAPackThatCouldNotBeSavedIsNotTakenForStored(t *testing.T) {
	dir := t.TempDir()
	_, err := git.PlainInit(dir, true)
	require.NoError(t, err)
	src := memory.NewStorage()
	hashes := addBlobs(t, src, 3)
	dst := filesystem.NewStorage(unrenamableFS{osfs.New(dir)}, cache.NewObjectLRUDefault())

	_, err = writePackfile(dst, src, hashes, dir)
	require.ErrorIs(t, err, errDiskFull)
	for _, h := range hashes {
		assert.ErrorIs(t, dst.HasEncodedObject(h), plumbing.ErrObjectNotFound,
			"the store does not look for %s in a pack that is not there", h)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	require.NoError(t, err)
	assert.Empty(t, entries, "neither the pack nor its index is left")
}

// addBlobs stores n small distinct blobs in store and returns their hashes.
func addBlobs(t *testing.T, store storer.EncodedObjectStorer, n int) []plumbing.Hash {
	t.Helper()
	hashes := make([]plumbing.Hash, n)
	for i := range hashes {
		obj := store.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		wr, err := obj.Writer()
		require.NoError(t, err)
		_, err = fmt.Fprintf(wr, "blob %d\n", i)
		require.NoError(t, err)
		require.NoError(t, wr.Close())
		hashes[i], err = store.SetEncodedObject(obj)
		require.NoError(t, err)
	}
	return hashes
}
