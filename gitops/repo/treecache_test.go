package repo

import (
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
)

func wideTree(id byte, n int) *object.Tree {
	t := &object.Tree{Hash: plumbing.Hash{id}}
	for i := range n {
		t.Entries = append(t.Entries, object.TreeEntry{Name: fmt.Sprintf("e%05d", i)})
	}
	return t
}

func TestTreeCache(t *testing.T) {
	t.Run("keeps wide trees and skips narrow ones", func(t *testing.T) {
		c := newTreeCache()
		c.put(wideTree(1, minCachedEntries))
		c.put(wideTree(2, minCachedEntries-1))
		_, wide := c.get(plumbing.Hash{1})
		_, narrow := c.get(plumbing.Hash{2})
		assert.True(t, wide)
		assert.False(t, narrow)
	})
	t.Run("evicts the least recently used tree beyond the entry budget", func(t *testing.T) {
		c := newTreeCache()
		half := maxCachedEntries / 2
		c.put(wideTree(1, half))
		c.put(wideTree(2, half))
		c.get(plumbing.Hash{1}) // 1 is now the most recent
		c.put(wideTree(3, half))
		_, one := c.get(plumbing.Hash{1})
		_, two := c.get(plumbing.Hash{2})
		assert.True(t, one)
		assert.False(t, two)
		assert.LessOrEqual(t, c.entries, maxCachedEntries)
	})
	t.Run("a missing cache caches nothing and finds nothing", func(t *testing.T) {
		var c *treeCache
		c.put(wideTree(1, minCachedEntries))
		_, ok := c.get(plumbing.Hash{1})
		assert.False(t, ok)
	})
}
