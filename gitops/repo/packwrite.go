package repo

import (
	"bufio"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// writePackfile writes the objects hashes, read from src, as one packfile (and index) of
// dst, the clone in dir, without delta search: it is local storage, written once; pushes
// choose their own. It returns the pack's checksum, which names its files. A pack it could
// not finish (a full disk) leaves no temporary file: go-git's writer leaves it, and each
// retry would add one. Callers hold r.mu, or the clone is not open yet.
func writePackfile(dst storer.PackfileWriter, src storer.EncodedObjectStorer, hashes []plumbing.Hash, dir string) (sum plumbing.Hash, err error) {
	w, err := openPack(dst)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("open a packfile for %d objects: %w", len(hashes), err)
	}
	defer func() {
		if err != nil {
			removeStalePackTemps(dir)
		}
	}()
	// Buffered, since the encoder writes each object header and body separately.
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := packfile.NewEncoder(bw, src, false).Encode(hashes, 0); err != nil {
		_ = w.Close()
		return plumbing.ZeroHash, fmt.Errorf("write a packfile of %d objects: %w", len(hashes), err)
	}
	if err := bw.Flush(); err != nil {
		_ = w.Close()
		return plumbing.ZeroHash, fmt.Errorf("write a packfile of %d objects: %w", len(hashes), err)
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("index a packfile of %d objects: %w", len(hashes), err)
	}
	return w.sum, nil
}

// storePack stores a complete packfile, as a push sent it, in the clone in dir, with its
// index (which go-git's writer builds by reading the pack back). Like writePackfile, it
// leaves no temporary file behind when it fails.
func storePack(dst storer.PackfileWriter, pack []byte, dir string) (err error) {
	w, err := openPack(dst)
	if err != nil {
		return fmt.Errorf("open a packfile: %w", err)
	}
	defer func() {
		if err != nil {
			removeStalePackTemps(dir)
		}
	}()
	if _, err := w.Write(pack); err != nil {
		_ = w.Close()
		return fmt.Errorf("write a packfile: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("index a packfile: %w", err)
	}
	return nil
}

// savedPack is a packfile writer of the clone whose pack joins the store's index only once
// its files are saved. go-git's writer announces a pack whose index it built (Notify) even
// when saving its files then fails, and the store would go on looking in a pack that is
// not there for objects a retry stores elsewhere.
type savedPack struct {
	io.WriteCloser
	// announce is go-git's Notify, called once the pack is saved; nil for a writer that
	// has none.
	announce func(plumbing.Hash, *idxfile.Writer)
	// sum and index are what go-git's writer reported: the pack's checksum and its index.
	sum   plumbing.Hash
	index *idxfile.Writer
}

// openPack opens a packfile writer on dst (savedPack).
func openPack(dst storer.PackfileWriter) (*savedPack, error) {
	w, err := dst.PackfileWriter()
	if err != nil {
		return nil, err
	}
	saved := &savedPack{WriteCloser: w}
	if dw, ok := w.(*dotgit.PackWriter); ok {
		saved.announce = dw.Notify
		dw.Notify = func(h plumbing.Hash, ix *idxfile.Writer) { saved.sum, saved.index = h, ix }
	}
	return saved, nil
}

// Close saves the pack, then announces it.
func (w *savedPack) Close() error {
	if err := w.WriteCloser.Close(); err != nil {
		return err
	}
	if w.announce != nil && w.index != nil {
		w.announce(w.sum, w.index)
	}
	return nil
}
