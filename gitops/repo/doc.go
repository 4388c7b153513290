// Package repo keeps a persistent local bare clone of one Git remote and
// writes commits to it with go-git plumbing only.
//
// The remote is the truth and the local clone is a cache: Open repairs a
// damaged clone (for example a ref file left empty by a kill -9) by
// re-initialising it instead of failing, and every write is a compare-and-swap
// against the remote branch, so nothing someone else pushed is ever
// overwritten.
//
// Cost per commit is proportional to the change, not to the repository: Commit
// re-encodes only the trees on the changed paths and reuses every other hash,
// and Push sends only the objects that differ from the commit the remote
// already has, found by comparing tree hashes along the changed paths. There
// is no worktree, and nothing walks the whole tree or history.
package repo
