package repo

import (
	"container/list"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Wide trees are the one part of a commit whose cost grows with the repository: Git trees
// are flat lists, so a folder listing 1,000 namespaces is a 1,000-entry tree that planning
// reads and every commit under it decodes and rewrites. treeCache keeps the decoded form
// of wide trees, by hash (trees are immutable), so each is parsed once, not on every plan
// and commit.
const (
	// minCachedEntries: narrower trees are cheap to decode and not worth the memory.
	minCachedEntries = 64
	// maxCachedEntries bounds the cache by the entries it holds (about 100 bytes each).
	maxCachedEntries = 200_000
)

// treeCache is an LRU of decoded wide trees. Callers hold Repo.mu.
type treeCache struct {
	byHash  map[plumbing.Hash]*list.Element
	order   *list.List // most recently used first
	entries int
}

func newTreeCache() *treeCache {
	return &treeCache{byHash: map[plumbing.Hash]*list.Element{}, order: list.New()}
}

// get returns the cached tree of h.
func (c *treeCache) get(h plumbing.Hash) (*object.Tree, bool) {
	if c == nil {
		return nil, false
	}
	e, ok := c.byHash[h]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*object.Tree), true
}

// put caches t when it is wide enough to be worth it. Nobody may modify t's entries later.
func (c *treeCache) put(t *object.Tree) {
	if c == nil || len(t.Entries) < minCachedEntries || len(t.Entries) > maxCachedEntries {
		return
	}
	if _, ok := c.byHash[t.Hash]; ok {
		return
	}
	c.byHash[t.Hash] = c.order.PushFront(t)
	c.entries += len(t.Entries)
	for c.entries > maxCachedEntries {
		last := c.order.Back()
		old := last.Value.(*object.Tree)
		c.order.Remove(last)
		delete(c.byHash, old.Hash)
		c.entries -= len(old.Entries)
	}
}

// tree returns the decoded tree h, from the cache when it is there. Callers hold r.mu.
func (r *Repo) tree(h plumbing.Hash) (*object.Tree, error) {
	if t, ok := r.trees.get(h); ok {
		return t, nil
	}
	t, err := object.GetTree(r.objects(), h)
	if err != nil {
		return nil, err
	}
	r.trees.put(t)
	return t, nil
}
