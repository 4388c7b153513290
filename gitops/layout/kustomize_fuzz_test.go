package layout

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzKustomizeOutside feeds ParseKustomization whatever a Kustomize file of a repository
// could hold, and judges it from above the folder and from beside it. Whatever the content,
// parsing never panics and gives only local paths as written, and a refusal names that file
// and says why; a Kustomize file that refers into the folder is always refused. The seed
// corpus is in testdata/fuzz/FuzzKustomizeOutside (go test -fuzz FuzzKustomizeOutside
// ./gitops/layout adds to it).
func FuzzKustomizeOutside(f *testing.F) {
	f.Fuzz(func(t *testing.T, content []byte) {
		refs := ParseKustomization(content)
		for _, p := range refs.Paths {
			require.NotEmpty(t, p, "an empty path")
			require.False(t, remote(p), "a remote reference %q counted as a path", p)
		}
		for _, file := range []string{"kustomization.yaml", "overlays/prod/kustomization.yaml"} {
			verdict := KustomizeOutside("live", []KustomizeFile{{Path: file, KustomizeRefs: refs}})
			reaches := slices.ContainsFunc(refs.Paths, func(p string) bool {
				target := path.Clean(path.Join(path.Dir(file), p))
				return target == "live" || strings.HasPrefix(target, "live/")
			})
			if verdict.Supported {
				require.False(t, reaches, "%s refers into the folder, yet the folder is supported", file)
				continue
			}
			require.Equal(t, file, verdict.File, "the refusal names another file")
			require.NotEmpty(t, verdict.Reason)
			require.True(t, reaches || refs.Err != nil, "%s is refused, but neither refers into the folder nor fails to parse", file)
		}
	})
}
