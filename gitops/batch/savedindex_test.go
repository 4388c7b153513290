package batch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// exampleIndex is the index of a folder of two files, one of them with two objects.
func exampleIndex() *folderIndex {
	ix := &folderIndex{byID: map[manifest.Identity]layout.Location{}, byFile: map[string][]manifest.Identity{},
		blobs: map[string]plumbing.Hash{}}
	add := func(file string, doc int, id manifest.Identity, digest manifest.Digest) {
		ix.byID[id] = layout.Location{File: file, Doc: doc, Digest: digest}
		ix.byFile[file] = append(ix.byFile[file], id)
		ix.blobs[file] = plumbing.ComputeHash(plumbing.BlobObject, []byte(file))
	}
	add("live/a.yaml", 0, manifest.Identity{Kind: "ConfigMap", Namespace: "app", Name: "a"}, manifest.Digest{1, 2, 3})
	add("live/both.yaml", 2, manifest.Identity{Group: "apps", Kind: "Deployment", Namespace: "app", Name: "b"}, manifest.Digest{})
	add("live/both.yaml", 0, manifest.Identity{Kind: "Namespace", Name: "app"}, manifest.Digest{9})
	return ix
}

func TestASavedIndexRoundTrips(t *testing.T) {
	ix := exampleIndex()

	back := fromSaved(toSaved("build", "live", ix))

	assert.Equal(t, ix.byID, back.byID)
	assert.Equal(t, ix.blobs, back.blobs)
	for file, ids := range ix.byFile {
		assert.ElementsMatch(t, ids, back.byFile[file], file)
		assert.Equal(t, ix.reusedParse(file, ix.blobs[file]), back.reusedParse(file, ix.blobs[file]), file)
	}
	assert.Equal(t, "live", back.folder)
	assert.True(t, back.describes().IsZero(), "a saved index describes no commit, so planning trusts none of its digests")
}

func TestASavedIndexIsTakenOnlyWhole(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)) // a clone
	require.NoError(t, saveIndex(dir, "build", "live", exampleIndex()))
	data, err := os.ReadFile(savedIndexPath(dir, "live"))
	require.NoError(t, err)
	require.NotNil(t, decodeIndex(data, "build", "live"))

	damaged := bytes.Replace(data, []byte(`"name":"a"`), []byte(`"name":"b"`), 1) // still decodes
	require.NotEqual(t, data, damaged)
	assert.Nil(t, decodeIndex(damaged, "build", "live"), "a changed entry does not match the sum")
	assert.Nil(t, decodeIndex(data, "another build", "live"))
	assert.Nil(t, decodeIndex(data, "build", "elsewhere"))
}

func TestAnIndexSavedAtStopSparesTheNextStartParsingUnchangedFiles(t *testing.T) {
	const key = "build-1"
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"live/app/configmaps/a.yaml": configMapDoc("a", "1"),
		"live/app/configmaps/b.yaml": configMapDoc("b", "1")}, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	spec := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Committer: Identity{Name: "W", Email: "w@example.com"}}
	work := t.TempDir()
	start := func(key string) (*Manager, *target) {
		m := NewManager(Options{Log: logr.Discard(), WorkDir: work, Resolver: fixedResolver{}, IndexKey: key})
		_, err := m.EnsureTarget(context.Background(), spec)
		require.NoError(t, err)
		w := m.workerOf(liveKey)
		return m, w.targets[liveKey]
	}

	// The first run stops: its worker keeps the index in the clone.
	first, _ := start(key)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = first.Start(ctx); close(done) }()
	cancel()
	<-done
	w := first.workerOf(liveKey)
	clone := w.repo.Dir()
	path := savedIndexPath(clone, "live")
	require.FileExists(t, path)
	saved := loadIndex(clone, key, "live")
	require.NotNil(t, saved)
	assert.Equal(t, w.targets[liveKey].index.Load().byID, saved.byID, "the saved index is the one the worker had")
	require.NoError(t, w.repo.Close())

	// To see which parse the next start takes, the saved index says each file holds another
	// object: a file whose blob is unchanged is taken from it, never parsed.
	const a, b = "live/app/configmaps/a.yaml", "live/app/configmaps/b.yaml"
	savedA := manifest.Identity{Kind: "ConfigMap", Namespace: "app", Name: "a-from-the-saved-index"}
	savedB := manifest.Identity{Kind: "ConfigMap", Namespace: "app", Name: "b-from-the-saved-index"}
	saved.byID = map[manifest.Identity]layout.Location{savedA: {File: a}, savedB: {File: b}}
	saved.byFile = map[string][]manifest.Identity{a: {savedA}, b: {savedB}}
	write := func(key, folder string) {
		t.Helper()
		require.NoError(t, saveIndex(clone, key, folder, saved))
	}
	indexed := func(ix *folderIndex) []string {
		var names []string
		for id := range ix.byID {
			names = append(names, id.Name)
		}
		return names
	}

	for _, tt := range []struct {
		name    string
		prepare func()
		key     string
		want    []string
	}{
		{"takes the saved parse of every file whose blob did not change", func() { write(key, "live") }, key,
			[]string{"a-from-the-saved-index", "b-from-the-saved-index"}},
		{"parses every file when another build saved the index", func() { write(key, "live") }, "build-2", []string{"a", "b"}},
		{"parses every file when the index was saved for another folder", func() { write(key, "elsewhere") }, key, []string{"a", "b"}},
		{"parses only the file whose blob changed since", func() {
			write(key, "live")
			c := remote.Clone("main")
			c.WriteFile(a, configMapDoc("a", "2"))
			c.CommitAndPush("main", "a person's edit")
		}, key, []string{"a", "b-from-the-saved-index"}},
		{"parses every file when the saved index is damaged", func() {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(`{"key":"build-1","folder":"live","files":[{`), 0o644))
		}, key, []string{"a", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(filepath.Join(clone, savedIndexDir)))
			tt.prepare()
			m, tgt := start(tt.key)
			assert.ElementsMatch(t, tt.want, indexed(tgt.index.Load()))
			require.NoError(t, m.workerOf(liveKey).repo.Close())
		})
	}
}

func TestATargetLeavesItsIndexInTheCloneOnlyWhileSuspendedThere(t *testing.T) {
	const key = "build-1"
	const a = "live/app/configmaps/a.yaml"
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{a: configMapDoc("a", "1"), "other/app/configmaps/c.yaml": configMapDoc("c", "1")}, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	live := TargetSpec{Key: liveKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
		Committer: Identity{Name: "W", Email: "w@example.com"}}
	other := live
	other.Key, other.Folder = types.NamespacedName{Namespace: "ops", Name: "other"}, "other"
	m := NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), Resolver: fixedResolver{}, IndexKey: key})
	ensure := func(spec TargetSpec) *target {
		t.Helper()
		_, err := m.EnsureTarget(context.Background(), spec)
		require.NoError(t, err)
		return m.workerOf(spec.Key).targets[spec.Key]
	}
	ensure(live)
	ensure(other) // keeps the clone, and its worker, while live is away
	clone := m.workerOf(liveKey).repo.Dir()

	m.SuspendTarget(liveKey, "its GitProvider is gone")
	saved := loadIndex(clone, key, "live")
	require.NotNil(t, saved, "a suspended target leaves its index in the clone")
	// To see which parse the return takes, the saved index says a.yaml holds another object.
	claimed := manifest.Identity{Kind: "ConfigMap", Namespace: "app", Name: "a-from-the-saved-index"}
	saved.byID = map[manifest.Identity]layout.Location{claimed: {File: a}}
	saved.byFile = map[string][]manifest.Identity{a: {claimed}}
	require.NoError(t, saveIndex(clone, key, "live", saved))
	back := ensure(live)
	assert.Contains(t, back.index.Load().byID, claimed, "coming back parses only the files that changed while it was away")

	m.RemoveTarget(liveKey)
	assert.NoFileExists(t, savedIndexPath(clone, "live"), "a deleted target takes its saved index along")
	require.DirExists(t, clone, "the other target still uses the clone")

	require.NoError(t, saveIndex(clone, key, "other", m.workerOf(other.Key).targets[other.Key].index.Load()))
	other.Folder = "live"
	ensure(other)
	assert.NoFileExists(t, savedIndexPath(clone, "other"), "a target that moves to another folder takes the old folder's index along")

	m.SuspendTarget(other.Key, "its GitProvider is gone")
	m.mu.Lock()
	workers := len(m.workers)
	m.mu.Unlock()
	require.Zero(t, workers, "the worker of its last target retired")
	saved = loadIndex(clone, key, "live")
	require.NotNil(t, saved, "the worker's last target leaves its index in the clone too")
	saved.byID = map[manifest.Identity]layout.Location{claimed: {File: a}}
	saved.byFile = map[string][]manifest.Identity{a: {claimed}}
	require.NoError(t, saveIndex(clone, key, "live", saved))
	back = ensure(other)
	assert.Contains(t, back.index.Load().byID, claimed, "the new worker takes the index its retired one left")
	require.NoError(t, m.workerOf(other.Key).repo.Close())
}

func TestASavedIndexIsWrittenOnlyIntoAClone(t *testing.T) {
	ix := newFolderIndex(layout.Index{manifest.Identity{Kind: "ConfigMap", Name: "a"}: {File: "live/a.yaml"}},
		[]repo.File{{Path: "live/a.yaml", Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("a"))}})
	gone := filepath.Join(t.TempDir(), "clone")
	require.NoError(t, saveIndex(gone, "build", "live", ix))
	assert.NoDirExists(t, gone, "a clone deleted or being repaired is not made again as a directory that holds no repository")

	notRepo := t.TempDir()
	require.NoError(t, saveIndex(notRepo, "build", "live", ix))
	assert.NoDirExists(t, filepath.Join(notRepo, savedIndexDir))
}

func TestASavedIndexLeavesOutWhatReusedParseWouldNotReuse(t *testing.T) {
	blob := plumbing.ComputeHash(plumbing.BlobObject, []byte("x"))
	x, y := manifest.Identity{Kind: "ConfigMap", Name: "x"}, manifest.Identity{Kind: "ConfigMap", Name: "y"}
	moved := &folderIndex{byID: map[manifest.Identity]layout.Location{x: {File: "live/other.yaml"}, y: {File: "live/a.yaml", Doc: 1}},
		byFile: map[string][]manifest.Identity{"live/a.yaml": {x, y}}, blobs: map[string]plumbing.Hash{"live/a.yaml": blob}}
	require.Nil(t, moved.reusedParse("live/a.yaml", blob))
	assert.Nil(t, fromSaved(toSaved("build", "live", moved)).reusedParse("live/a.yaml", blob),
		"a file one of whose objects the index moved elsewhere is parsed again, as in memory")

	twice := savedIndex{Key: "build", Folder: "live", Files: []savedFile{{Path: "live/a.yaml", Blob: blob.String(),
		Docs: []savedDoc{{Index: 0, Kind: "ConfigMap", Name: "x"}, {Index: 1, Kind: "ConfigMap", Name: "x"}}}}}
	assert.Nil(t, fromSaved(twice).reusedParse("live/a.yaml", blob), "an object listed twice is no entry toSaved writes")
}
