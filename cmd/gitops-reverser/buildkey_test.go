package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBuildKeyNamesThisBuildTheSameOnEveryCall(t *testing.T) {
	key := buildKey()
	assert.NotEmpty(t, key, "a test binary records no clean VCS revision: its executable's digest names it")
	assert.Equal(t, key, buildKey())
}
