package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
)

// selfExe is the running executable, as the kernel holds it: a binary replaced on disk
// since the start does not name this build.
const selfExe = "/proc/self/exe"

// buildKey names this build of the operator for batch.Options.IndexKey: a folder index
// saved by another build is not reused, since its parser may judge files differently. It
// is the Go build ID, which the toolchain derives from every input of the binary (sources,
// dependencies, toolchain, flags) and keeps in an ELF note, a few bytes to read; where
// there is none, a SHA-256 of the executable; "" (nothing saved) when neither can be read.
func buildKey() string {
	if id := goBuildID(selfExe); id != "" {
		return "go-build:" + id
	}
	exe := selfExe
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return ""
		}
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

// goBuildID reads the Go build ID from the ".note.go.buildid" ELF note of the executable
// at path: a note named "Go" of type 4 whose description is the ID. "" when there is none.
func goBuildID(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	data, err := sec.Data()
	if err != nil || len(data) < 16 {
		return ""
	}
	order := f.ByteOrder
	nameSize, descSize, kind := order.Uint32(data[0:]), order.Uint32(data[4:]), order.Uint32(data[8:])
	const goBuildIDNote = 4
	name, desc := 12, 12+align4(nameSize)
	if kind != goBuildIDNote || uint64(desc)+uint64(descSize) > uint64(len(data)) ||
		!bytes.Equal(bytes.TrimRight(data[name:name+int(nameSize)], "\x00"), []byte("Go")) {
		return ""
	}
	return string(data[desc : desc+int(descSize)])
}

// align4 rounds n up to a multiple of 4, as ELF note fields are padded.
func align4(n uint32) int { return int((n + 3) &^ 3) }
