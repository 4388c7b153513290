package repo_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// BenchmarkCommitLargeFolder commits one changed file into a folder of 50 and
// of 5,000 files. "nested" spreads the files over namespaces (50 per
// directory, the canonical layout), so only the directory width on the changed
// path matters and both sizes cost the same; "flat" puts every file in one
// directory, where the one tree on the path has N entries and must be
// re-encoded (Git trees are flat lists), which is the only size-dependent part.
func BenchmarkCommitLargeFolder(b *testing.B) {
	layouts := map[string]func(i int) string{
		"nested": func(i int) string { return fmt.Sprintf("live/ns-%03d/configmaps/cm-%02d.yaml", i/50, i%50) },
		"flat":   func(i int) string { return fmt.Sprintf("live/ns/configmaps/cm-%04d.yaml", i) },
	}
	for _, layout := range []string{"nested", "flat"} {
		for _, n := range []int{50, 5000} {
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

	i := 0
	for b.Loop() {
		i++
		change := map[string][]byte{target: fmt.Appendf(nil, "changed %d\n", i)}
		if _, err := r.Commit(base, change, signature(), signature(), "one file"); err != nil {
			b.Fatal(err)
		}
	}
}
