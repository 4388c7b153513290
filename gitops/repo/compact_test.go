package repo_test

import (
	"context"
	"fmt"
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

// countObjects reads `git count-objects -v` of the clone: the git CLI as an observer.
func countObjects(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(repotest.Git(t, dir, "count-objects", "-v"), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			out[k] = v
		}
	}
	return out
}

// pushSeries commits and pushes n changes of a.yaml on top of tip, one at a time.
func pushSeries(t *testing.T, r *repo.Repo, tip plumbing.Hash, values ...string) plumbing.Hash {
	t.Helper()
	for _, v := range values {
		next := commit(t, r, tip, files("live/a.yaml", v), "set a to "+v)
		push(t, r, "main", next, tip)
		tip = next
	}
	return tip
}

func TestCompactKeepsOnlyTheTipAndLaterFetchesStillBringWhatOlderCommitsHad(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v1\n", "live/b.yaml": "b\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	tip := pushSeries(t, r, fetch(t, r, "main"), "v2\n", "v3\n", "v4\n")
	before := countObjects(t, r.Dir())
	require.NotEqual(t, "0", before["count"], "each commit left loose objects")

	stats, err := r.Compact("main")

	require.NoError(t, err)
	assert.Equal(t, 5, stats.Kept, "the tip commit, two trees and two blobs")
	assert.Positive(t, stats.LooseRemoved)
	after := countObjects(t, r.Dir())
	assert.Equal(t, "0", after["count"], "no loose objects are left")
	assert.Equal(t, "1", after["packs"], "one packfile holds the tip")
	shallow, err := os.ReadFile(filepath.Join(r.Dir(), "shallow"))
	require.NoError(t, err)
	assert.Equal(t, tip.String()+"\n", string(shallow))
	repotest.Git(t, r.Dir(), "fsck", "--full", "--strict", "--no-dangling", "--no-progress")

	// Someone restores a's first content, a blob only history had, and the clone must get
	// it: the fetch told the remote the clone is shallow. With reachability bitmaps (as
	// hosted remotes have) a remote that was not told so would leave the blob out, since
	// the tip's history has it.
	repotest.Git(t, remote.Dir, "repack", "-a", "-d", "-b", "-q")
	human := remote.PushFiles("main", map[string]string{"live/a.yaml": "v1\n", "live/c.yaml": "c\n"}, "restore a")
	got := fetch(t, r, "main")
	require.Equal(t, human, got.String())
	content, found, err := r.ReadFile(got, "live/a.yaml")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "v1\n", string(content))

	// The writer goes on: a commit on the fetched tip pushes cleanly, history stays linear.
	next := commit(t, r, got, files("live/b.yaml", "b2\n"), "change b")
	push(t, r, "main", next, got)
	remote.Fsck()
	assert.Equal(t, next.String(), remote.Head("main"))
	assert.Len(t, remote.Log("main"), 6, "seed, three writer commits, the human's, one more")

	reopened, err := repo.Open(context.Background(), r.Dir(), remote.URL, nil)
	require.NoError(t, err)
	assert.NoError(t, reopened.RepairedDamage(), "a compacted clone opens as it is")
}

func TestCompactIfDueWaitsForTheThresholdAndForThePush(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	r.SetCompactionThresholds(12, 50)
	tip := pushSeries(t, r, fetch(t, r, "main"), "v2\n") // 4 loose objects

	done, _, err := r.CompactIfDue("main")
	require.NoError(t, err)
	assert.False(t, done, "below the threshold")

	tip = pushSeries(t, r, tip, "v3\n", "v4\n") // 12 loose objects
	unpushed := commit(t, r, tip, files("live/a.yaml", "v5\n"), "not pushed yet")
	done, _, err = r.CompactIfDue("main")
	require.NoError(t, err)
	assert.False(t, done, "never while a commit waits for its push")

	push(t, r, "main", unpushed, tip)
	done, stats, err := r.CompactIfDue("main")
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, 4, stats.Kept)
	assert.Equal(t, "0", countObjects(t, r.Dir())["count"])
}

func TestACommitWhosePushFailedDoesNotHoldCompactionBack(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	r.SetCompactionThresholds(1_000_000, 3)
	tip := fetch(t, r, "main") // pack 1
	lost := commit(t, r, tip, files("live/a.yaml", "v2\n"), "loses the race")
	remote.PushFiles("main", map[string]string{"live/a.yaml": "v2\n"}, "a person makes the same change")
	require.ErrorIs(t, r.Push(context.Background(), "main", lost, tip), repo.ErrRemoteMoved)
	// The writer replays on the new tip, finds nothing left to write, and commits nothing.
	for _, v := range []string{"h1\n", "h2\n", "h3\n"} {
		remote.PushFiles("main", map[string]string{"live/h.yaml": v}, "human "+v)
		tip = fetch(t, r, "main")
	}

	done, _, err := r.CompactIfDue("main")

	require.NoError(t, err)
	assert.True(t, done, "packs from people's commits do not pile up behind an abandoned commit")
	assert.Equal(t, "1", countObjects(t, r.Dir())["packs"])
	content, found, err := r.ReadFile(tip, "live/h.yaml")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "h3\n", string(content))
}

func TestCompactIfDueCountsPackfiles(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	r.SetCompactionThresholds(1_000_000, 3)
	tip := fetch(t, r, "main") // pack 1
	for _, v := range []string{"h1\n", "h2\n"} {
		remote.PushFiles("main", map[string]string{"live/h.yaml": v}, "human "+v)
		tip = fetch(t, r, "main") // packs 2 and 3
	}

	done, stats, err := r.CompactIfDue("main")

	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, 3, stats.PacksRemoved)
	assert.Equal(t, "1", countObjects(t, r.Dir())["packs"])
	content, found, err := r.ReadFile(tip, "live/h.yaml")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "h2\n", string(content))
}

func TestCompactRefusesWhileACommitWaitsForItsPush(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	pending := commit(t, r, tip, files("live/a.yaml", "v2\n"), "not pushed yet")

	_, err := r.Compact("main")

	require.ErrorIs(t, err, repo.ErrCommitPending)
	push(t, r, "main", pending, tip)
	assert.Equal(t, pending.String(), remote.Head("main"), "the commit still pushes")
}

// openPackfiles lists the clone's files this process holds open (Linux: /proc/self/fd).
func openPackfiles(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list open files: %v", err)
	}
	var open []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			open = append(open, target)
		}
	}
	return open
}

func TestTheCloneKeepsItsPackfilesOpenAndReleasesThemWhenTheyGo(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	tip := fetch(t, r, "main")
	for _, v := range []string{"h1\n", "h2\n"} {
		remote.PushFiles("main", map[string]string{"live/h.yaml": v}, "human "+v)
		tip = fetch(t, r, "main")
	}
	read := func() {
		content, found, err := r.ReadFile(tip, "live/a.yaml")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, "v1\n", string(content))
		_, _, err = r.ReadFile(tip, "live/h.yaml")
		require.NoError(t, err)
	}
	read()
	require.NotEmpty(t, openPackfiles(t, r.Dir()), "packfiles stay open between reads")

	_, err := r.Compact("main")
	require.NoError(t, err)
	read()
	for _, f := range openPackfiles(t, r.Dir()) {
		assert.NotContains(t, f, "(deleted)", "no descriptor outlives the packfiles compaction removed")
	}

	require.NoError(t, r.Reset())
	assert.Empty(t, openPackfiles(t, r.Dir()), "Reset closes every packfile of the old clone")
}

func TestTheCloneNeverKeepsMoreThanItsBoundOfPackfilesOpen(t *testing.T) {
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v0\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	r.SetCompactionThresholds(0, 0) // as when compaction cannot run: pushes keep failing
	var tips []plumbing.Hash
	for i := range repo.MaxOpenPackfiles + 4 {
		remote.PushFiles("main", map[string]string{fmt.Sprintf("live/f%03d.yaml", i): fmt.Sprintf("v%d\n", i)}, "a human commit")
		tips = append(tips, fetch(t, r, "main")) // one packfile each
	}
	for i, tip := range tips { // each read opens the pack its commit came in
		content, found, err := r.ReadFile(tip, fmt.Sprintf("live/f%03d.yaml", i))
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, fmt.Sprintf("v%d\n", i), string(content))
	}
	packs, err := filepath.Glob(filepath.Join(r.Dir(), "objects", "pack", "*.pack"))
	require.NoError(t, err)
	require.Greater(t, len(packs), repo.MaxOpenPackfiles)
	open := 0
	for _, f := range openPackfiles(t, r.Dir()) {
		if strings.HasSuffix(f, ".pack") {
			open++
		}
	}
	assert.LessOrEqual(t, open, repo.MaxOpenPackfiles)
	assert.Positive(t, open)
}

// go-git rewrites the clone's shallow list in place, so a kill during compaction can leave
// it empty or torn, with history deleted that the list no longer names. That clone still
// works (fetches negotiate from the tip, and nothing reads history), and the next fetch
// marks its new tip shallow, leaving the torn history unreferenced; so it is no damage to
// repair.
func TestAShallowListAKillLeftEmptyOrTornDoesNotStopTheWriter(t *testing.T) {
	for name, content := range map[string]string{
		"emptied (a kill after go-git truncated it)": "",
		"torn (a kill half way through a hash)":      "0123456789abcdef01\n",
	} {
		t.Run(name, func(t *testing.T) {
			remote := repotest.NewHTTPRemote(t)
			remote.Seed("main", map[string]string{"live/a.yaml": "v1\n"}, "seed")
			r := openClone(t, remote.URL, nil)
			tip := pushSeries(t, r, fetch(t, r, "main"), "v2\n", "v3\n")
			_, err := r.Compact("main") // the tip is marked shallow, its history deleted
			require.NoError(t, err)
			tip = pushSeries(t, r, tip, "v4\n")
			require.NoError(t, os.WriteFile(filepath.Join(r.Dir(), "shallow"), []byte(content), 0o644))

			reopened, err := repo.Open(context.Background(), r.Dir(), remote.URL, nil)

			require.NoError(t, err)
			require.NoError(t, reopened.RepairedDamage())
			human := remote.PushFiles("main", map[string]string{"live/b.yaml": "b\n"}, "a person's commit")
			got := fetch(t, reopened, "main")
			require.Equal(t, human, got.String())
			next := commit(t, reopened, got, files("live/a.yaml", "v5\n"), "after the kill")
			push(t, reopened, "main", next, got)
			remote.Fsck()
			assert.Equal(t, next.String(), remote.Head("main"))
			// The fetch marked its tip shallow, and no ref names the torn history any more.
			repotest.Git(t, reopened.Dir(), "fsck", "--full", "--strict", "--no-dangling", "--no-progress")
		})
	}
}

func TestCompactIfDueLeavesACloneOfAnAbsentBranchAlone(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)
	remote.Seed("main", map[string]string{"live/a.yaml": "v1\n"}, "seed")
	r := openClone(t, remote.URL, nil)
	r.SetCompactionThresholds(1_000_000, 1)
	fetch(t, r, "main") // a pack, for another target of the clone
	assert.True(t, fetch(t, r, "new").IsZero(), "a branch the writer creates with its first push")

	done, _, err := r.CompactIfDue("new")

	require.NoError(t, err, "no tip to keep is nothing to compact, not a failure")
	assert.False(t, done)
}
