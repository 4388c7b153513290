package repo_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// BenchmarkCommitLargeFolder commits one changed file into folders of 50, 5,000 and 50,000
// files, leaving out storing the commit in the clone (the operator does that after the
// push). "nested" spreads the files over namespaces (50 per directory, the canonical
// layout), so what grows is the one tree listing the namespaces (1,000 entries at 50,000
// files), which each commit re-encodes: Git trees are flat lists. "flat" puts every file in
// one directory, the worst case for that.
func BenchmarkCommitLargeFolder(b *testing.B) {
	layouts := map[string]func(i int) string{
		"nested": func(i int) string { return fmt.Sprintf("live/ns-%03d/configmaps/cm-%02d.yaml", i/50, i%50) },
		"flat":   func(i int) string { return fmt.Sprintf("live/ns/configmaps/cm-%04d.yaml", i) },
	}
	sizes := map[string][]int{"nested": {50, 5000, 50000}, "flat": {50, 5000}}
	for _, layout := range []string{"nested", "flat"} {
		for _, n := range sizes[layout] {
			b.Run(fmt.Sprintf("%s/files=%d", layout, n), func(b *testing.B) {
				benchmarkOneFileCommit(b, n, layouts[layout])
			})
		}
	}
}

func benchmarkOneFileCommit(b *testing.B, n int, pathOf func(int) string) {
	r, err := repo.Open(context.Background(), filepath.Join(b.TempDir(), "clone"), "file:///unused", nil)
	require.NoError(b, err)
	all := make(map[string][]byte, n)
	for i := range n {
		all[pathOf(i)] = fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  k: v\n", i)
	}
	base, err := r.Commit(plumbing.ZeroHash, all, signature(), signature(), "seed")
	require.NoError(b, err)
	target := pathOf(n / 2)
	_, _, err = r.ReadFile(base, target) // stores the seed in the clone, outside the timing
	require.NoError(b, err)

	b.ResetTimer()
	for i := range b.N {
		change := map[string][]byte{target: fmt.Appendf(nil, "changed %d\n", i)}
		if _, err := r.Commit(base, change, signature(), signature(), "one file"); err != nil {
			b.Fatal(err)
		}
		// Storing the commit in the clone happens after its push in the operator, so
		// it is left out of the timing.
		b.StopTimer()
		_, _, err := r.ReadFile(base, target)
		require.NoError(b, err)
		b.StartTimer()
	}
}

// BenchmarkCompact packs the tip of a 50,000-file folder (1,000 namespaces of 50) and
// deletes the rest: what the writer pays every few thousand loose objects.
func BenchmarkCompact(b *testing.B) {
	remote := repotest.NewFileRemote(b)
	r, err := repo.Open(context.Background(), filepath.Join(b.TempDir(), "clone"), remote.URL, nil)
	require.NoError(b, err)
	all := make(map[string][]byte, 50000)
	for i := range 50000 {
		all[fmt.Sprintf("live/ns-%03d/configmaps/cm-%02d.yaml", i/50, i%50)] = fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  k: v\n", i)
	}
	tip, err := r.Commit(plumbing.ZeroHash, all, signature(), signature(), "seed")
	require.NoError(b, err)
	require.NoError(b, r.Push(context.Background(), "main", tip, plumbing.ZeroHash))
	for b.Loop() {
		if _, err := r.Compact("main"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFindFiles looks for Kustomize files in a repository of 50,000 files (1,000
// namespaces of 50, as a GitTarget's folder would be), with 100 Kustomize files among them: "first" with nothing remembered, as at a
// worker's first analysis, and "after-a-commit" once a commit changed one file, as every
// re-analysis after a person's commit is.
func BenchmarkFindFiles(b *testing.B) {
	r, err := repo.Open(context.Background(), filepath.Join(b.TempDir(), "clone"), "file:///unused", nil)
	require.NoError(b, err)
	all := map[string][]byte{"live/app.yaml": []byte("kind: ConfigMap\n")}
	for i := range 50000 {
		all[fmt.Sprintf("other/ns-%03d/configmaps/cm-%02d.yaml", i/50, i%50)] = fmt.Appendf(nil, "kind: ConfigMap\n# %d\n", i)
	}
	for i := range 100 {
		all[fmt.Sprintf("other/ns-%03d/kustomization.yaml", i*10)] = []byte("resources: []\n")
	}
	base, err := r.Commit(plumbing.ZeroHash, all, signature(), signature(), "seed")
	require.NoError(b, err)
	next, err := r.Commit(base, map[string][]byte{"other/ns-500/configmaps/cm-00.yaml": []byte("changed\n")}, signature(), signature(), "one file")
	require.NoError(b, err)
	_, _, err = r.ReadFile(next, "live/app.yaml") // stores both commits, outside the timing
	require.NoError(b, err)
	find := func(f *repo.FileFinder, commit plumbing.Hash) {
		found, err := r.FindFiles(f, commit)
		if err != nil || len(found) != 100 {
			b.Fatalf("found %d files: %v", len(found), err)
		}
	}
	b.Run("first", func(b *testing.B) {
		for range b.N {
			find(repo.NewFileFinder("kustomization.yaml"), next)
		}
	})
	b.Run("after-a-commit", func(b *testing.B) {
		f := repo.NewFileFinder("kustomization.yaml")
		for range b.N {
			b.StopTimer()
			find(f, base)
			b.StartTimer()
			find(f, next)
		}
	})
}
