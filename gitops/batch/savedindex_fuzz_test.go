package batch

import (
	"encoding/hex"
	"encoding/json"
	"slices"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// FuzzFromSaved reads whatever a clone's saved index file could hold as its entries.
// Whatever they are, the index never offers a parse for reuse that one entry does not say
// whole, for that very path and blob, with document positions and identities a parse could
// have given. decodeIndex also checks the file's sum, which a fuzzer would hardly ever get
// right, so the entries are read with fromSaved directly. The seed corpus is in
// testdata/fuzz/FuzzFromSaved (go test -fuzz FuzzFromSaved ./gitops/batch adds to it).
func FuzzFromSaved(f *testing.F) {
	f.Add(savedExample(f))
	f.Add([]byte(`{"key":"build","folder":"live","files":[{"path":"live/a.yaml","blob":"` + blobOf("a") + `","docs":[{"index":0,"kind":"ConfigMap","name":"a"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s savedIndex
		if json.Unmarshal(data, &s) != nil {
			return
		}
		ix := fromSaved(s)
		for path, blob := range ix.blobs {
			docs := ix.reusedParse(path, blob)
			if docs == nil {
				continue
			}
			for _, d := range docs {
				require.GreaterOrEqual(t, d.Index, 0, "%s: a document position no parse gives", path)
				require.NotEmpty(t, d.Identity.Kind, "%s: an object without a kind", path)
				require.NotEmpty(t, d.Identity.Name, "%s: an object without a name", path)
			}
			require.True(t, slices.ContainsFunc(s.Files, func(e savedFile) bool {
				return e.Path == path && e.Blob == blob.String() && slices.Equal(docInfos(t, e.Docs), docs)
			}), "%s: the reused parse %v is no entry of the saved index", path, docs)
		}
	})
}

// docInfos is what a saved file's documents say, as reusedParse returns them (by position).
func docInfos(t *testing.T, saved []savedDoc) []manifest.DocInfo {
	out := make([]manifest.DocInfo, 0, len(saved))
	for _, d := range saved {
		var digest manifest.Digest
		if d.Digest != "" {
			b, err := hex.DecodeString(d.Digest)
			if err != nil || len(b) != len(digest) {
				return nil
			}
			copy(digest[:], b)
		}
		out = append(out, manifest.DocInfo{Index: d.Index, Digest: digest,
			Identity: manifest.Identity{Group: d.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}})
	}
	slices.SortFunc(out, func(a, b manifest.DocInfo) int { return a.Index - b.Index })
	return out
}

// savedExample is exampleIndex as toSaved writes it.
func savedExample(f *testing.F) []byte {
	data, err := json.Marshal(toSaved("build", "live", exampleIndex()))
	require.NoError(f, err)
	return data
}

// blobOf is the hash of a blob holding content, as saved.
func blobOf(content string) string {
	return plumbing.ComputeHash(plumbing.BlobObject, []byte(content)).String()
}
