package repo_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestOpenCreatesABareCloneWithoutAWorktree(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	dir := filepath.Join(t.TempDir(), "work", "clone")

	r, err := repo.Open(context.Background(), dir, remote.URL, nil)

	require.NoError(t, err)
	assert.Equal(t, "true", repotest.Git(t, dir, "rev-parse", "--is-bare-repository"))
	assert.Equal(t, remote.URL, repotest.Git(t, dir, "config", "remote.origin.url"))
	assert.NoFileExists(t, filepath.Join(dir, ".git"))
	assert.NoError(t, r.Verify())
}

func TestOpenReusesAHealthyClone(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	tipWanted := remote.Seed("main", map[string]string{"a.yaml": "a\n"}, "one")
	dir := filepath.Join(t.TempDir(), "clone")
	r, err := repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)
	tip := fetch(t, r, "main")

	again, err := repo.Open(context.Background(), dir, remote.URL, nil)

	require.NoError(t, err)
	require.NoError(t, again.RepairedDamage())
	got, err := again.ReadTree(tip, "") // objects survive: no re-download needed
	require.NoError(t, err)
	assert.Len(t, got, 1)
	assert.Equal(t, tipWanted, tip.String())
}

// damage is what a crash (or a person) can do to the clone's files.
type damage struct {
	name  string
	apply func(t *testing.T, dir string)
}

func writeFile(rel, content string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// keepOnly removes every entry of the clone but name, as a deletion killed part-way leaves it.
func keepOnly(name string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		require.FileExists(t, filepath.Join(dir, name))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if e.Name() != name {
				require.NoError(t, os.RemoveAll(filepath.Join(dir, e.Name())))
			}
		}
	}
}

// damaged is repotest.DamageObject of the entry at path in branch main.
func damaged(path string, garble []byte) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		repotest.DamageObject(t, dir, "main", path, garble)
	}
}

func TestOpenAndFetchHealADamagedClone(t *testing.T) {
	damages := []damage{
		{"an empty remote-tracking ref (kill -9 mid-write)", writeFile("refs/remotes/origin/main", "")},
		{"an empty local branch ref", writeFile("refs/heads/main", "")},
		{"garbage in a ref", writeFile("refs/remotes/origin/main", "not a hash\n")},
		{"a ref to a missing commit", writeFile("refs/remotes/origin/main", "0123456789abcdef0123456789abcdef01234567\n")},
		{"garbage in config", writeFile("config", "[core\n\tbare = maybe\n\x00\x01")},
		{"an empty HEAD", writeFile("HEAD", "")},
		{"garbage packed-refs", writeFile("packed-refs", "zzz refs/heads/x\n\x00")},
		{"config of a different remote", writeFile("config", "[core]\n\tbare = true\n[remote \"origin\"]\n\turl = https://elsewhere.example/other.git\n")},
		{"an empty ref file in a nested directory", writeFile("refs/remotes/origin/feature/x", "")},
		{"only the shallow file left (an older release killed while deleting the clone to repair it)", keepOnly("shallow")},
		{"a subtree of the tip missing (a kill while compaction deleted objects)", damaged("live", nil)},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			remote := repotest.NewHTTPRemote(t)
			remote.Seed("main", map[string]string{"live/a.yaml": "a\n"}, "one")
			dir := filepath.Join(t.TempDir(), "clone")
			first, err := repo.Open(context.Background(), dir, remote.URL, nil)
			require.NoError(t, err)
			tip := fetch(t, first, "main")

			d.apply(t, dir)
			r, err := repo.Open(context.Background(), dir, remote.URL, nil)

			require.NoError(t, err, "a damaged cache is repaired, not fatal")
			require.ErrorIs(t, r.RepairedDamage(), repo.ErrDamaged, "the repair is reported for status and metrics")
			require.NoError(t, r.Verify())
			assert.Equal(t, tip, fetch(t, r, "main"))
			c := commit(t, r, tip, files("live/b.yaml", "b\n"), "after repair")
			push(t, r, "main", c, tip)
			assert.Equal(t, c.String(), remote.Head("main"))
			remote.Fsck()
		})
	}
}

// fetchedClone is a clone under a temporary directory that fetched main of a one-commit remote.
func fetchedClone(t *testing.T) (*repotest.Remote, string, plumbing.Hash) {
	t.Helper()
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "a\n"}, "one")
	dir := filepath.Join(t.TempDir(), "clone")
	r, err := repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)
	return remote, dir, fetch(t, r, "main")
}

func TestARepairKilledPartWayLeavesEitherTheOldCloneOrNone(t *testing.T) {
	remote, dir, tip := fetchedClone(t)
	// Killed after moving the damaged clone aside, before deleting it or making a new one.
	require.NoError(t, os.Rename(dir, dir+".removing"))

	r, err := repo.Open(context.Background(), dir, remote.URL, nil)

	require.NoError(t, err)
	assert.Equal(t, tip, fetch(t, r, "main"))
	assert.NoDirExists(t, dir+".removing", "what the killed repair left is cleaned up")
}

func TestOpenRemovesWhatAKilledWriteLeftInThePackDirectory(t *testing.T) {
	remote, dir, tip := fetchedClone(t)
	packDir := filepath.Join(dir, "objects", "pack")
	packs, err := filepath.Glob(filepath.Join(packDir, "pack-*.pack"))
	require.NoError(t, err)
	require.NotEmpty(t, packs)
	left := []string{"tmp_pack_123", "tmp_obj_456", "pack-0123456789abcdef0123456789abcdef01234567.idx"}
	for _, name := range left {
		require.NoError(t, os.WriteFile(filepath.Join(packDir, name), []byte("trunc"), 0o644))
	}

	r, err := repo.Open(context.Background(), dir, remote.URL, nil)

	require.NoError(t, err)
	for _, name := range left {
		assert.NoFileExists(t, filepath.Join(packDir, name))
	}
	assert.FileExists(t, packs[0], "packs and their indexes stay")
	assert.FileExists(t, strings.TrimSuffix(packs[0], ".pack")+".idx")
	assert.Equal(t, tip, fetch(t, r, "main"))
}

// fetchedFileClone is an open clone of a one-commit file:// remote, main fetched at tip.
func fetchedFileClone(t *testing.T) (*repo.Repo, plumbing.Hash) {
	t.Helper()
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"a.yaml": "a\n"}, "one")
	r := openClone(t, remote.URL, nil)
	return r, fetch(t, r, "main")
}

func TestVerifyDetectsDamageAndResetRepairsIt(t *testing.T) {
	r, tip := fetchedFileClone(t)

	writeFile("refs/remotes/origin/main", "")(t, r.Dir())
	require.ErrorIs(t, r.Verify(), repo.ErrDamaged)

	require.NoError(t, r.Reset())
	require.NoError(t, r.Verify())
	assert.Equal(t, tip, fetch(t, r, "main"))
}

// A reset that re-initialised the clone and then failed to write its config leaves a clone
// that names no remote, which Verify accepts (a new clone names none until it is
// configured); the config is written by hand here, as a failing disk could not be made to
// fail on cue.
func TestAFetchConfiguresTheRemoteOfACloneWhoseConfigLostIt(t *testing.T) {
	r, tip := fetchedFileClone(t)

	writeFile("config", "[core]\n\tbare = true\n")(t, r.Dir())
	require.NoError(t, r.Verify())
	assert.Equal(t, tip, fetch(t, r, "main"), "the fetch names its remote again, rather than failing until a restart")
}

func TestVerifyFindsABlobThatNoLongerDecompresses(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"a.yaml": "a\n", "live/b.yaml": "b\n"}, "one")
	r := openClone(t, remote.URL, nil)
	fetch(t, r, "main")
	damaged("a.yaml", []byte("x\x9c garbage"))(t, r.Dir())
	r, err := repo.Open(context.Background(), r.Dir(), remote.URL, nil) // a new process: nothing cached
	require.NoError(t, err)
	require.NoError(t, r.RepairedDamage(), "at start blobs are not read")

	err = r.Verify()
	require.ErrorIs(t, err, repo.ErrDamaged)
	assert.Contains(t, err.Error(), "a.yaml")
}

func TestOpenRefusesToDeleteADirectoryThatIsNotABareRepository(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	cases := map[string]func(dir string){
		"unrelated files": func(dir string) { writeFile("notes.txt", "precious")(t, dir) },
		"a work tree":     func(dir string) { repotest.Git(t, dir, "init", "--quiet") },
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			prepare(dir)

			_, err := repo.Open(context.Background(), dir, remote.URL, nil)

			require.ErrorIs(t, err, repo.ErrNotRepository)
			assert.DirExists(t, dir)
		})
	}
}

func TestOpenInAnEmptyExistingDirectoryInitialisesIt(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	dir := t.TempDir()

	r, err := repo.Open(context.Background(), dir, remote.URL, nil)

	require.NoError(t, err)
	require.NoError(t, r.RepairedDamage())
	assert.Equal(t, "true", repotest.Git(t, dir, "rev-parse", "--is-bare-repository"))
}

func TestOpenWithACancelledContextFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := repo.Open(ctx, t.TempDir(), "file:///nowhere", nil)

	require.ErrorIs(t, err, context.Canceled)
}

func TestFetchOfAnEmptyRemoteOrAMissingBranchIsTheZeroHash(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	r := openClone(t, remote.URL, nil)
	assert.Equal(t, plumbing.ZeroHash, fetch(t, r, "main"), "empty repository")

	remote.Seed("main", map[string]string{"a.yaml": "a\n"}, "one")
	assert.Equal(t, plumbing.ZeroHash, fetch(t, r, "other"), "missing branch")
}

func TestFetchTwiceIsNotAnError(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	want := remote.Seed("main", map[string]string{"a.yaml": "a\n"}, "one")
	r := openClone(t, remote.URL, nil)

	assert.Equal(t, want, fetch(t, r, "main").String())
	assert.Equal(t, want, fetch(t, r, "main").String(), "already up to date")
}

func TestFetchFollowsARemoteThatWasRewrittenAndForgetsADeletedBranch(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"a.yaml": "a\n"}, "one")
	r := openClone(t, remote.URL, nil)
	fetch(t, r, "main")

	c := remote.Clone("main")
	c.Git("commit", "--quiet", "--amend", "-m", "rewritten")
	c.Git("push", "--quiet", "--force", "origin", "HEAD:refs/heads/main")
	assert.Equal(t, remote.Head("main"), fetch(t, r, "main").String(), "the remote is the truth")

	repotest.Git(t, remote.Dir, "update-ref", "-d", "refs/heads/main")
	assert.Equal(t, plumbing.ZeroHash, fetch(t, r, "main"))
	_, err := repotest.RunGit(t, r.Dir(), "rev-parse", "--verify", "--quiet", "refs/remotes/origin/main")
	assert.Error(t, err, "the stale tracking ref is gone")
}

func TestFetchOfAMissingRepositoryFails(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	r := openClone(t, remote.URL+"-missing", nil)

	_, err := r.Fetch(context.Background(), "main")

	require.Error(t, err)
}

func TestBranchNamesAreValidated(t *testing.T) {
	r := openClone(t, repotest.NewFileRemote(t).URL, nil)
	for _, b := range []string{"", "a..b", "with space", "x.lock", "-dash"} {
		_, err := r.Fetch(context.Background(), b)
		require.ErrorIs(t, err, plumbing.ErrInvalidReferenceName, "branch %q", b)
	}
}
