package batch

import (
	"context"
	"os"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestASavedIndexRoundTrips(t *testing.T) {
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
	path := savedIndexPath(w.repo.Dir(), "live")
	require.FileExists(t, path)
	saved := loadIndex(path, key, "live")
	require.NotNil(t, saved)
	assert.Equal(t, w.targets[liveKey].index.Load().byID, saved.byID, "the saved index is the one the worker had")
	require.NoError(t, w.repo.Close())

	// To see which parse the next start takes, the saved index says a.yaml holds another
	// object: only a file whose blob is unchanged is taken from it, never parsed.
	tampered := manifest.Identity{Kind: "ConfigMap", Namespace: "app", Name: "from-the-saved-index"}
	aBlob := saved.blobs["live/app/configmaps/a.yaml"]
	saved.byID = map[manifest.Identity]layout.Location{tampered: {File: "live/app/configmaps/a.yaml"}}
	saved.byFile = map[string][]manifest.Identity{"live/app/configmaps/a.yaml": {tampered}}
	saved.blobs = map[string]plumbing.Hash{"live/app/configmaps/a.yaml": aBlob}
	write := func(key, folder string) {
		t.Helper()
		require.NoError(t, saveIndex(path, key, folder, saved))
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
		{"takes the saved parse of a file whose blob did not change", func() { write(key, "live") }, key,
			[]string{"from-the-saved-index", "b"}},
		{"parses every file when another build saved the index", func() { write(key, "live") }, "build-2", []string{"a", "b"}},
		{"parses every file when the index was saved for another folder", func() { write(key, "elsewhere") }, key, []string{"a", "b"}},
		{"parses a file whose blob changed since", func() {
			write(key, "live")
			c := remote.Clone("main")
			c.WriteFile("live/app/configmaps/a.yaml", configMapDoc("a", "2"))
			c.CommitAndPush("main", "a person's edit")
		}, key, []string{"a", "b"}},
		{"parses every file when the saved index is damaged", func() {
			require.NoError(t, os.WriteFile(path, []byte(`{"key":"build-1","folder":"live","files":[{`), 0o644))
		}, key, []string{"a", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.prepare()
			m, tgt := start(tt.key)
			assert.ElementsMatch(t, tt.want, indexed(tgt.index.Load()))
			require.NoError(t, m.workerOf(liveKey).repo.Close())
		})
	}
}
