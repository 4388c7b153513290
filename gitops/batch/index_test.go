package batch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// cmDoc is ConfigMap team-a/<name> with data.v.
func cmDoc(name, v string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: team-a\ndata:\n  v: %q\n", name, v)
}

// treeFiles is a folder as repo.ReadTree returns it, path → content.
func treeFiles(files map[string]string) []repo.File {
	out := make([]repo.File, 0, len(files))
	for p, c := range files {
		out = append(out, repo.File{Path: p, Content: []byte(c), Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(c))})
	}
	return out
}

// analysed is what worker.analyze builds from files, reusing prev's parses.
func analysed(files []repo.File, prev *folderIndex) (layout.Verdict, *folderIndex) {
	verdict, ix := layout.Analyze("live", layoutFiles(files, prev))
	return verdict, newFolderIndex(ix, files)
}

// nonEmptyDocs is manifest.Parse's result without empty documents.
func nonEmptyDocs(t *testing.T, content string) []manifest.DocInfo {
	t.Helper()
	docs, err := manifest.Parse([]byte(content))
	require.NoError(t, err)
	var out []manifest.DocInfo
	for _, d := range docs {
		if !d.Empty {
			out = append(out, d)
		}
	}
	return out
}

func TestReusedParse(t *testing.T) {
	pair := "# two\n" + cmDoc("a", "1") + "---\n" + cmDoc("b", "1") + "---\n"
	files := treeFiles(map[string]string{"live/pair.yaml": pair, "live/README.md": "docs\n", "live/c.yaml": cmDoc("c", "1")})
	verdict, ix := analysed(files, nil)
	require.True(t, verdict.Supported, verdict.Message())
	hashOf := func(c string) plumbing.Hash { return plumbing.ComputeHash(plumbing.BlobObject, []byte(c)) }

	t.Run("hands over the parse of a file whose blob is the same, documents in order", func(t *testing.T) {
		assert.Equal(t, nonEmptyDocs(t, pair), ix.reusedParse("live/pair.yaml", hashOf(pair)))
	})
	t.Run("parses a file whose blob changed", func(t *testing.T) {
		assert.Nil(t, ix.reusedParse("live/pair.yaml", hashOf(pair+"# more\n")))
	})
	t.Run("parses a file it has not seen and one without objects", func(t *testing.T) {
		assert.Nil(t, ix.reusedParse("live/new.yaml", hashOf(pair)))
		assert.Nil(t, ix.reusedParse("live/README.md", hashOf("docs\n")))
	})
	t.Run("follows the writer's own commits", func(t *testing.T) {
		_, ix := analysed(files, nil)
		changed := cmDoc("c", "2")
		require.NoError(t, ix.setFile("live/c.yaml", []byte(changed), nil))
		assert.Nil(t, ix.reusedParse("live/c.yaml", hashOf(cmDoc("c", "1"))))
		assert.Equal(t, nonEmptyDocs(t, changed), ix.reusedParse("live/c.yaml", hashOf(changed)))
	})
	t.Run("parses a file again when a commit moved one of its objects elsewhere", func(t *testing.T) {
		_, ix := analysed(files, nil)
		require.NoError(t, ix.setFile("live/c.yaml", []byte(cmDoc("c", "1")+"---\n"+cmDoc("b", "1")), nil))
		assert.Nil(t, ix.reusedParse("live/pair.yaml", hashOf(pair)))
		loc, ok := ix.lookup(manifest.Identity{Kind: "ConfigMap", Namespace: "team-a", Name: "b"})
		require.True(t, ok)
		assert.Equal(t, "live/c.yaml", loc.File)
		require.NoError(t, ix.setFile("live/pair.yaml", []byte(cmDoc("a", "1")), nil))
		_, ok = ix.lookup(manifest.Identity{Kind: "ConfigMap", Namespace: "team-a", Name: "b"})
		assert.True(t, ok, "re-indexing the file it left does not drop it from the index")
	})
	t.Run("reuses nothing from a folder it could not index", func(t *testing.T) {
		bad := treeFiles(map[string]string{"live/pair.yaml": pair, "live/run.sh": "#!/bin/sh\n"})
		verdict, ix := analysed(bad, nil)
		require.False(t, verdict.Supported)
		assert.Nil(t, ix.reusedParse("live/pair.yaml", hashOf(pair)))
	})
}

func TestAnalysisReusingParsesEqualsAFreshOne(t *testing.T) {
	before := map[string]string{
		"live/a.yaml":    cmDoc("a", "1"),
		"live/pair.yaml": cmDoc("b", "1") + "---\n" + cmDoc("c", "1"),
		"live/d.yaml":    cmDoc("d", "1"),
	}
	tests := []struct {
		name  string
		after map[string]string
	}{
		{name: "one file changed", after: map[string]string{"live/a.yaml": cmDoc("a", "2")}},
		{name: "an object moved between files by a person", after: map[string]string{
			"live/pair.yaml": cmDoc("b", "1"), "live/a.yaml": cmDoc("a", "1") + "---\n" + cmDoc("c", "1")}},
		{name: "a changed file now defines an object an unchanged file has", after: map[string]string{
			"live/a.yaml": cmDoc("a", "1") + "---\n" + cmDoc("d", "9")}},
		{name: "a changed file no longer parses", after: map[string]string{"live/a.yaml": "data: [\n"}},
		{name: "a file removed and one added", after: map[string]string{"live/d.yaml": "", "live/e.yaml": cmDoc("e", "1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, prev := analysed(treeFiles(before), nil)
			next := map[string]string{}
			for p, c := range before {
				next[p] = c
			}
			for p, c := range tt.after {
				if c == "" {
					delete(next, p)
				} else {
					next[p] = c
				}
			}
			files := treeFiles(next)
			wantVerdict, want := analysed(files, nil)
			gotVerdict, got := analysed(files, prev)
			assert.Equal(t, wantVerdict, gotVerdict)
			assert.Equal(t, want.byID, got.byID)
			assert.Equal(t, want.blobs, got.blobs)
			assert.ElementsMatch(t, want.identities(), got.identities())
		})
	}
}

// BenchmarkReanalyse is the folder analysis after a person changed one file of a
// 10,000-file folder (the remote moved): parsing every file, against reusing the earlier
// parse of the 9,999 unchanged ones, and against the first analysis after a restart that
// reads the index the last run saved (savedIndex) from disk.
func BenchmarkReanalyse(b *testing.B) {
	folder := map[string]string{}
	for i := range 10_000 {
		folder[fmt.Sprintf("live/team-a/cm-%05d.yaml", i)] = cmDoc(fmt.Sprintf("cm-%05d", i), "1")
	}
	_, prev := analysed(treeFiles(folder), nil)
	saved := b.TempDir() // a clone, as far as saveIndex looks
	require.NoError(b, os.WriteFile(filepath.Join(saved, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	require.NoError(b, saveIndex(saved, "build", "live", prev))
	folder["live/team-a/cm-00042.yaml"] = cmDoc("cm-00042", "2")
	files := treeFiles(folder)
	for _, bc := range []struct {
		name string
		prev func() *folderIndex
	}{
		{"parse-every-file", func() *folderIndex { return nil }},
		{"reuse-unchanged", func() *folderIndex { return prev }},
		{"restart-with-saved-index", func() *folderIndex { return loadIndex(saved, "build", "live") }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if v, _ := analysed(files, bc.prev()); !v.Supported {
					b.Fatal(v.Message())
				}
			}
		})
	}
}

func TestAnIndexFollowsOnlyTheCommitsItDescribes(t *testing.T) {
	a, b, c := plumbing.NewHash("aa"), plumbing.NewHash("bb"), plumbing.NewHash("cc")
	ix := newFolderIndex(nil, nil)
	ix.tip = a
	ix.advance(b, c)
	assert.Equal(t, a, ix.describes(), "a push on top of a commit it never described leaves it behind")
	ix.advance(a, b)
	assert.Equal(t, b, ix.describes())
}

func TestTouches(t *testing.T) {
	files := map[string][]byte{"live/team-a/app.yaml": nil}
	assert.True(t, touches(files, "live"))
	assert.True(t, touches(files, ""), "the repository root holds everything")
	assert.False(t, touches(files, "other"))
	assert.False(t, touches(files, "liv"), "a folder is a path prefix by segments, not by characters")
}

func TestPathProblem(t *testing.T) {
	files := []repo.File{
		{Path: "live/app/configmaps/a.yaml", Kind: repo.Regular, Content: []byte(cmDoc("a", "1"))},
		{Path: "live/app/configmaps/dir.yaml/README.md", Kind: repo.Regular, Content: []byte("a directory\n")},
		{Path: "live/app/secrets", Kind: repo.Regular, Content: []byte("a file where a directory belongs\n")},
	}
	ix := newFolderIndex(layout.Index{}, files)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"lets the writer create a file where nothing is", "live/app/configmaps/new.yaml", ""},
		{"lets the writer edit a regular file", "live/app/configmaps/a.yaml", ""},
		{"names a directory at the path", "live/app/configmaps/dir.yaml", "live/app/configmaps/dir.yaml is a directory in Git"},
		{"names a file where a directory on the way belongs", "live/app/secrets/db.sops.yaml",
			"live/app/secrets is a file in Git where live/app/secrets/db.sops.yaml needs a directory"},
		{"names a path the writer never edits", `live/app/we\ird.yaml`, `live/app/we\ird.yaml is named with a backslash`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ix.pathProblem(tc.path)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
	t.Run("knows nothing without an index", func(t *testing.T) {
		var none *folderIndex
		assert.Empty(t, none.pathProblem("live/app/configmaps/dir.yaml"))
	})
}

func TestPathProblemFollowsTheWritersOwnFiles(t *testing.T) {
	ix := newFolderIndex(layout.Index{}, nil)
	require.NoError(t, ix.setFile("live/app/configmaps/a.yaml", []byte(cmDoc("a", "1")), nil))
	require.NoError(t, ix.setFile("live/app/configmaps/b.yaml", []byte(cmDoc("b", "1")), nil))
	assert.Contains(t, ix.pathProblem("live/app/configmaps"), "is a directory in Git")
	assert.Contains(t, ix.pathProblem("live/app/configmaps/a.yaml/x.yaml"), "live/app/configmaps/a.yaml is a file in Git")

	require.NoError(t, ix.setFile("live/app/configmaps/a.yaml", []byte(cmDoc("a", "2")), nil)) // an edit adds no file
	require.NoError(t, ix.setFile("live/app/configmaps/a.yaml", nil, nil))
	assert.Contains(t, ix.pathProblem("live/app/configmaps"), "is a directory in Git", "b is still there")
	require.NoError(t, ix.setFile("live/app/configmaps/b.yaml", nil, nil))
	assert.Empty(t, ix.pathProblem("live/app/configmaps"), "Git has no empty directories")
	assert.Empty(t, ix.pathProblem("live/app/configmaps/a.yaml/x.yaml"))
}

func TestNamespacedLikeFollowsTheFilesItWasBuiltFrom(t *testing.T) {
	ix := newFolderIndex(layout.Index{}, nil)
	role := func(ns string) string {
		return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n  namespace: %s\n", ns)
	}
	cluster := manifest.Identity{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "reader"}
	require.NoError(t, ix.setFile("live/b.yaml", []byte(role("team-b")), nil))
	assert.Equal(t, []string{"team-b"}, namespacesOf(ix.namespacedLike(cluster)))
	require.NoError(t, ix.setFile("live/a.yaml", []byte(role("team-a")), nil))
	assert.Equal(t, []string{"team-a", "team-b"}, namespacesOf(ix.namespacedLike(cluster)), "a file written since is seen")
	require.NoError(t, ix.setFile("live/b.yaml", nil, nil))
	assert.Equal(t, []string{"team-a"}, namespacesOf(ix.namespacedLike(cluster)), "and one removed since is not")
	require.NoError(t, ix.setFile("live/c.yaml", []byte(role("team-d")+"---\n"+role("team-c")), nil))
	require.NoError(t, ix.setFile("live/c.yaml", []byte(role("team-c")), nil))
	assert.NotNil(t, ix.namespaced.Load(), "kept in step, not dropped for a scan of the folder at the next plan")
	got := ix.namespacedLike(cluster)
	assert.Equal(t, []string{"team-a", "team-c"}, namespacesOf(got))
	ix.namespaced.Store(nil)
	assert.Equal(t, ix.namespacedLike(cluster), got, "as a scan of the folder finds")
}

func namespacesOf(ids []manifest.Identity) []string {
	out := []string{}
	for _, id := range ids {
		out = append(out, id.Namespace)
	}
	return out
}
