package layout

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// FuzzAnalyze judges a folder of two manifests of any content, with a third file whose kind
// and name the fuzzer picks. Whatever the files, Analyze never panics, gives the same
// verdict for the files in any order, and either owns the folder with an index that points
// each object at the document of a file that defines it, or refuses it naming one of the
// files, with a reason, and counting no more other files than there are. The seed corpus is
// in testdata/fuzz/FuzzAnalyze (go test -fuzz FuzzAnalyze ./gitops/layout adds to it).
func FuzzAnalyze(f *testing.F) {
	f.Fuzz(func(t *testing.T, first, second []byte, third byte) {
		names := []string{"live/x.txt", "live/x.sh", "live/kustomization.yaml", "live/README.md", "live/x.yaml"}
		files := []File{
			{Path: "live/a.yaml", Content: first},
			{Path: "live/b/c.yml", Content: second},
			{Path: names[int(third)%len(names)], Kind: EntryKind(int(third/8) % 4), Content: first},
		}
		verdict, index := Analyze("live", files)
		again, _ := Analyze("live", []File{files[2], files[1], files[0]})
		require.Equal(t, verdict, again, "the verdict depends on the order of the files")
		require.Equal(t, verdict.Supported, index != nil)
		if !verdict.Supported {
			require.True(t, slices.ContainsFunc(files, func(f File) bool { return f.Path == verdict.File }), "the refusal names %q", verdict.File)
			require.NotEmpty(t, verdict.Reason)
			require.Less(t, verdict.More, len(files))
			require.True(t, strings.Contains(verdict.Message(), verdict.File))
			return
		}
		for id, loc := range index {
			i := slices.IndexFunc(files, func(f File) bool { return f.Path == loc.File })
			require.GreaterOrEqual(t, i, 0, "%s is indexed in %q", id, loc.File)
			docs, err := manifest.Parse(files[i].Content)
			require.NoError(t, err, "an owned folder's manifest does not parse")
			j := slices.IndexFunc(docs, func(d manifest.DocInfo) bool { return d.Index == loc.Doc })
			require.GreaterOrEqual(t, j, 0, "%s points at document %d of %s, which has none", id, loc.Doc, loc.File)
			require.Equal(t, id, docs[j].Identity, "%s points at another object's document", id)
			require.Equal(t, docs[j].Digest, loc.Digest)
		}
	})
}
