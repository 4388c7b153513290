package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildKeyIsTheGoBuildIDTheToolchainRecorded(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	// go tool buildid reads the same note: an independent observer of the key.
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	assert.Equal(t, "go-build:"+strings.TrimSpace(string(out)), buildKey())
	assert.Equal(t, buildKey(), buildKey(), "the same on every call")
}

func TestGoBuildIDIsEmptyForAFileWithoutTheNote(t *testing.T) {
	assert.Empty(t, goBuildID("/bin/sh"))
	assert.Empty(t, goBuildID(t.TempDir()))
}
