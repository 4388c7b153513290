package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
)

// buildKey names this build of the operator for batch.Options.IndexKey: a folder index
// saved by another build is not reused, since its parser may judge files differently. It
// is the module version and VCS revision the binary records when its tree was clean, else
// a digest of the executable; "" (nothing saved) when neither can be read.
func buildKey() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var revision, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if revision != "" && modified == "false" {
			return bi.Main.Version + "@" + revision
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
