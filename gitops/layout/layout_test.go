package layout_test

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

const (
	configMapApp     = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\n"
	deploymentAPI    = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: team-a\n"
	clusterRoleAdmin = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\n"
)

var (
	appID   = manifest.Identity{Kind: "ConfigMap", Namespace: "team-a", Name: "app"}
	apiID   = manifest.Identity{Group: "apps", Kind: "Deployment", Namespace: "team-a", Name: "api"}
	adminID = manifest.Identity{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"}
)

// yamlFile is a regular file with the given content.
func yamlFile(p, content string) layout.File {
	return layout.File{Path: p, Kind: layout.Regular, Content: []byte(content)}
}

func TestAnalyzeSupports(t *testing.T) {
	tests := []struct {
		name  string
		files []layout.File
		want  layout.Index
	}{
		{
			name:  "supports an empty folder with an empty index",
			files: nil,
			want:  layout.Index{},
		},
		{
			name: "indexes every object of single- and multi-document files",
			files: []layout.File{
				yamlFile("live/team-a/all.yaml", deploymentAPI+"---\n"+configMapApp),
				yamlFile("live/_cluster/admin.yml", clusterRoleAdmin),
			},
			want: layout.Index{
				apiID:   {File: "live/team-a/all.yaml", Doc: 0},
				appID:   {File: "live/team-a/all.yaml", Doc: 1},
				adminID: {File: "live/_cluster/admin.yml", Doc: 0},
			},
		},
		{
			name: "counts empty documents in document positions but does not index them",
			files: []layout.File{
				yamlFile("live/a.yaml", "---\n# placeholder\n---\n"+configMapApp+"---\n"),
			},
			want: layout.Index{appID: {File: "live/a.yaml", Doc: 1}},
		},
		{
			name: "accepts documentation and Git bookkeeping files beside manifests",
			files: []layout.File{
				yamlFile("live/README.md", "# Live objects"),
				yamlFile("live/docs/notes.txt", "notes"),
				yamlFile("live/docs/guide.rst", "guide"),
				yamlFile("live/LICENSE", "Apache-2.0"),
				yamlFile("live/LICENSE-THIRD-PARTY", "..."),
				yamlFile("live/OWNERS", "approvers: [a]"),
				yamlFile("live/OWNERS_ALIASES", "aliases: {}"),
				yamlFile("live/empty/.gitkeep", ""),
				yamlFile("live/empty2/.keep", ""),
				yamlFile("live/.gitignore", "*.tmp"),
				yamlFile("live/team-a/app.yaml", configMapApp),
			},
			want: layout.Index{appID: {File: "live/team-a/app.yaml", Doc: 0}},
		},
		{
			name: "accepts sops configuration without indexing it",
			files: []layout.File{
				yamlFile("live/.sops.yaml", "creation_rules:\n  - path_regex: '\\.sops\\.yaml$'\n    age: age1xyz\n"),
				yamlFile("live/team-a/app.yaml", configMapApp),
			},
			want: layout.Index{appID: {File: "live/team-a/app.yaml", Doc: 0}},
		},
		{
			name: "accepts YAML files that hold only comments",
			files: []layout.File{
				yamlFile("live/todo.yaml", "# objects will appear here\n"),
			},
			want: layout.Index{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verdict, index := layout.Analyze("live", tt.files)
			assert.True(t, verdict.Supported, verdict.Message())
			assert.Equal(t, "folder live can be owned", verdict.Message())
			assert.Empty(t, verdict.File)
			assert.Equal(t, tt.want, withoutDigests(index))
		})
	}
}

func TestAnalyzeRefuses(t *testing.T) {
	tests := []struct {
		name        string
		files       []layout.File
		wantFile    string
		wantMessage string
	}{
		{
			name: "refuses a folder holding a shell script, naming the file",
			files: []layout.File{
				yamlFile("live/team-a/app.yaml", configMapApp),
				yamlFile("live/x/run.sh", "#!/bin/sh\n"),
			},
			wantFile:    "live/x/run.sh",
			wantMessage: "folder live cannot be owned: live/x/run.sh is not a YAML manifest or documentation (only .yaml/.yml manifests and docs such as README.md may live in the folder)",
		},
		{
			name: "names the first file that stops the folder and counts the others refused by kind or name",
			files: []layout.File{
				yamlFile("live/team-a/app.yaml", configMapApp),
				yamlFile("live/x/run.sh", "#!/bin/sh\n"),
				yamlFile("live/a/build.sh", "#!/bin/sh\n"),
				{Path: "live/z/link.yaml", Kind: layout.Symlink},
			},
			wantFile:    "live/a/build.sh",
			wantMessage: "folder live cannot be owned: live/a/build.sh is not a YAML manifest or documentation (only .yaml/.yml manifests and docs such as README.md may live in the folder); move it out of the folder (and 2 more file(s) the folder may not hold)",
		},
		{
			name: "refuses an executable even when it is named like documentation",
			files: []layout.File{
				{Path: "live/README.md", Kind: layout.Executable, Content: []byte("# hi")},
			},
			wantFile:    "live/README.md",
			wantMessage: "folder live cannot be owned: live/README.md is an executable file (only plain manifests and docs may live in the folder); clear its executable bit (git update-index --chmod=-x) and push",
		},
		{
			name:        "refuses a symbolic link",
			files:       []layout.File{{Path: "live/app.yaml", Kind: layout.Symlink, Content: []byte("../elsewhere/app.yaml")}},
			wantFile:    "live/app.yaml",
			wantMessage: "folder live cannot be owned: live/app.yaml is a symbolic link (links may point outside the folder and are never followed)",
		},
		{
			name:        "refuses a submodule",
			files:       []layout.File{{Path: "live/vendor", Kind: layout.Submodule}},
			wantFile:    "live/vendor",
			wantMessage: "folder live cannot be owned: live/vendor is a Git submodule (its content lives in another repository)",
		},
		{
			name:        "refuses a kustomization.yaml because Kustomize layouts are not supported yet",
			files:       []layout.File{yamlFile("live/team-a/kustomization.yaml", "resources: [app.yaml]\n"), yamlFile("live/team-a/app.yaml", configMapApp)},
			wantFile:    "live/team-a/kustomization.yaml",
			wantMessage: "folder live cannot be owned: live/team-a/kustomization.yaml is a Kustomize file (Kustomize layouts are not supported yet)",
		},
		{
			name:        "refuses a kustomization.yml",
			files:       []layout.File{yamlFile("live/kustomization.yml", "resources: []\n")},
			wantFile:    "live/kustomization.yml",
			wantMessage: "Kustomize layouts are not supported yet",
		},
		{
			name:        "refuses a Kustomize file in another letter case, which a macOS checkout reads as one",
			files:       []layout.File{yamlFile("live/Kustomization.yaml", "resources: []\n")},
			wantFile:    "live/Kustomization.yaml",
			wantMessage: "Kustomize layouts are not supported yet",
		},
		{
			name:        "refuses a file named Kustomization",
			files:       []layout.File{yamlFile("live/Kustomization", "resources: []\n")},
			wantFile:    "live/Kustomization",
			wantMessage: "Kustomize layouts are not supported yet",
		},
		{
			name:        "refuses unparseable YAML, giving the parse reason",
			files:       []layout.File{yamlFile("live/a.yaml", configMapApp+"---\napiVersion: v1\nkind: Secret\n")},
			wantFile:    "live/a.yaml",
			wantMessage: "folder live cannot be owned: live/a.yaml is not a valid manifest: document 2 (line 6): missing metadata.name",
		},
		{
			name:        "refuses a manifest using an anchor, naming the file, document and line",
			files:       []layout.File{yamlFile("live/a.yaml", configMapApp+"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata: &shared\n  a: b\n")},
			wantFile:    "live/a.yaml",
			wantMessage: "folder live cannot be owned: live/a.yaml is a manifest the mirror cannot edit safely: document 2 (line 6): anchor (line 11, column 7): an edit would change every alias of it too",
		},
		{
			name:        "refuses a manifest using a custom tag",
			files:       []layout.File{yamlFile("live/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  a: !vault secret/a\n")},
			wantFile:    "live/a.yaml",
			wantMessage: "live/a.yaml is a manifest the mirror cannot edit safely: document 1 (line 1): custom tag (line 6, column 6)",
		},
		{
			name: "refuses the same object in two files, naming both",
			files: []layout.File{
				yamlFile("live/b.yaml", configMapApp),
				yamlFile("live/a.yaml", deploymentAPI+"---\n"+configMapApp),
			},
			wantFile:    "live/b.yaml",
			wantMessage: "folder live cannot be owned: live/b.yaml defines ConfigMap team-a/app (document 1), which live/a.yaml (document 2) also defines (duplicate object)",
		},
		{
			name:        "refuses the same object twice in one file",
			files:       []layout.File{yamlFile("live/a.yaml", configMapApp+"---\n"+configMapApp)},
			wantFile:    "live/a.yaml",
			wantMessage: "folder live cannot be owned: live/a.yaml defines ConfigMap team-a/app (document 2), which document 1 of the same file also defines (duplicate object)",
		},
		{
			name: "names the first offending file in sorted order",
			files: []layout.File{
				yamlFile("live/z/run.sh", ""),
				yamlFile("live/m/kustomization.yaml", ""),
				yamlFile("live/a/ok.yaml", configMapApp),
				yamlFile("live/b/image.png", ""),
			},
			wantFile:    "live/b/image.png",
			wantMessage: "live/b/image.png is not a YAML manifest or documentation",
		},
		{
			name:        "refuses upper-case YAML extensions that GitOps tools skip",
			files:       []layout.File{yamlFile("live/app.YAML", configMapApp)},
			wantFile:    "live/app.YAML",
			wantMessage: "is not a YAML manifest or documentation",
		},
		{
			name:        "refuses a file outside the folder",
			files:       []layout.File{yamlFile("other/app.yaml", configMapApp)},
			wantFile:    "other/app.yaml",
			wantMessage: "folder live cannot be owned: other/app.yaml is not inside the folder",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verdict, index := layout.Analyze("live", tt.files)
			assert.False(t, verdict.Supported)
			assert.Nil(t, index, "an unsupported folder has no index")
			assert.Equal(t, tt.wantFile, verdict.File)
			assert.Contains(t, verdict.Message(), tt.wantMessage)
		})
	}
}

func TestAnalyzeLeavesTheInputOrder(t *testing.T) {
	files := []layout.File{yamlFile("live/b.yaml", configMapApp), yamlFile("live/a.yaml", deploymentAPI)}
	layout.Analyze("live", files)
	assert.Equal(t, "live/b.yaml", files[0].Path)
}

func TestAnalyzeAtTheRepositoryRoot(t *testing.T) {
	verdict, index := layout.Analyze("", []layout.File{yamlFile("team-a/app.yaml", configMapApp)})
	assert.True(t, verdict.Supported)
	assert.Equal(t, "folder . can be owned", verdict.Message())
	assert.Equal(t, layout.Index{appID: {File: "team-a/app.yaml", Doc: 0}}, withoutDigests(index))
}

// withoutDigests zeroes the digests of an index, for tests about locations.
func withoutDigests(index layout.Index) layout.Index {
	for id, loc := range index {
		loc.Digest = manifest.Digest{}
		index[id] = loc
	}
	return index
}

func TestAnalyzeKeepsEachDocumentsDigest(t *testing.T) {
	verdict, index := layout.Analyze("live", []layout.File{yamlFile("live/all.yaml", deploymentAPI+"---\n"+configMapApp)})
	require.True(t, verdict.Supported)
	infos, err := manifest.Parse([]byte(deploymentAPI + "---\n" + configMapApp))
	require.NoError(t, err)
	for _, d := range infos {
		assert.Equal(t, d.Digest, index[d.Identity].Digest, d.Identity.String())
		assert.NotEqual(t, manifest.Digest{}, index[d.Identity].Digest)
	}
}

func TestEntryKindString(t *testing.T) {
	assert.Equal(t, "regular file", layout.Regular.String())
	assert.Equal(t, "executable file", layout.Executable.String())
	assert.Equal(t, "symbolic link", layout.Symlink.String())
	assert.Equal(t, "Git submodule", layout.Submodule.String())
	assert.Equal(t, "EntryKind(9)", layout.EntryKind(9).String())
}

// TestAnalyzeGolden analyses the folders under testdata/folders/<case>/live
// (all regular files) and compares the verdict and index with
// testdata/folders/<case>.golden. Run with -update to rewrite them.
func TestAnalyzeGolden(t *testing.T) {
	cases, err := os.ReadDir(filepath.Join("testdata", "folders"))
	require.NoError(t, err)
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			root := filepath.Join("testdata", "folders", c.Name())
			verdict, index := layout.Analyze("live", readTree(t, root))
			got := render(verdict, index)
			golden := root + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), got)
		})
	}
}

// readTree reads every file below root as a regular layout.File with a
// slash-separated path relative to root.
func readTree(t *testing.T, root string) []layout.File {
	t.Helper()
	var files []layout.File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, layout.File{Path: filepath.ToSlash(rel), Kind: layout.Regular, Content: content})
		return nil
	})
	require.NoError(t, err)
	return files
}

// render prints a verdict and index deterministically.
func render(verdict layout.Verdict, index layout.Index) string {
	var b strings.Builder
	fmt.Fprintln(&b, verdict.Message())
	lines := make([]string, 0, len(index))
	for id, loc := range index {
		lines = append(lines, fmt.Sprintf("  %s -> %s#%d", id, loc.File, loc.Doc))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(&b, l)
	}
	return b.String()
}

func TestAnalyzeUsesAnEarlierParseInsteadOfParsingAgain(t *testing.T) {
	docs, err := manifest.Parse([]byte(configMapApp))
	require.NoError(t, err)
	// Content that would not parse: only the earlier parse can make the folder supported.
	f := layout.File{Path: "live/team-a/app.yaml", Content: []byte("data: [\n"), Docs: docs}

	verdict, index := layout.Analyze("live", []layout.File{f})

	require.True(t, verdict.Supported, verdict.Message())
	assert.Equal(t, layout.Index{appID: {File: "live/team-a/app.yaml", Doc: 0, Digest: docs[0].Digest}}, index)
	f.Docs = nil
	verdict, _ = layout.Analyze("live", []layout.File{f})
	assert.False(t, verdict.Supported, "without it the content is parsed")
}
