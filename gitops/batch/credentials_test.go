package batch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// twoTargetsWithAuth runs a writer with GitTargets ops/live and ops/other, both with the
// credentials of a remote that demands basic auth, and windows that commit at once;
// otherFirst registers other before live.
func twoTargetsWithAuth(t *testing.T, otherFirst bool) (*repotest.Remote, *batch.Manager, *cluster, batch.TargetSpec, batch.TargetSpec) {
	t.Helper()
	remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
	remote.Seed("main", map[string]string{"live/README.md": "objects\n", "other/README.md": "objects\n"}, "seed")
	writer, c := startWriter(t)
	good := &githttp.BasicAuth{Username: "alice", Password: "s3cret"}
	live, other := targetSpec(t, "live", remote.URL, good), targetSpec(t, "other", remote.URL, good)
	live.Window, other.Window = batch.WindowConfig{MaxChanges: 100}, batch.WindowConfig{MaxChanges: 100}
	order := []batch.TargetSpec{live, other}
	if otherFirst {
		order = []batch.TargetSpec{other, live}
	}
	for _, s := range order {
		_, err := writer.EnsureTarget(context.Background(), s)
		require.NoError(t, err)
	}
	return remote, writer, c, live, other
}

func TestTargetsOfOneBranchUseTheirOwnCredentials(t *testing.T) {
	t.Run("pushes each target's changes with its own provider's credentials, whichever registered last", func(t *testing.T) {
		remote, writer, c, live, other := twoTargetsWithAuth(t, true)
		ctx := context.Background()
		// other's provider now holds a token the remote refuses (rotated, read-only); it
		// registers after live, so a shared clone would push live's changes with it.
		other.Auth = &githttp.BasicAuth{Username: "alice", Password: "read-only"}
		_, _ = writer.EnsureTarget(ctx, other)

		app := c.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"})
		writer.Submit(batch.Change{Target: live.Key, Key: app})
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/app.yaml") },
			10*time.Second, 50*time.Millisecond, "live pushes with its own credentials")

		// live registers again (its periodic reconcile), after other: other's changes must
		// still go out with other's credentials, and fail.
		_, err := writer.EnsureTarget(ctx, live)
		require.NoError(t, err)
		writer.Submit(batch.Change{Target: other.Key, Key: app})
		require.Eventually(t, func() bool {
			st, _ := writer.Status(other.Key)
			return st.LastError != ""
		}, 10*time.Second, 50*time.Millisecond, "other's push fails with other's credentials")
		assert.NotContains(t, remote.LsTree("main"), "other/app", "never pushed with live's credentials")
	})
}

// Another target's fetch a moment before must not vouch for credentials it did not use.
func TestATargetWhoseCredentialsChangedTriesThemWhenItRegisters(t *testing.T) {
	_, writer, _, live, other := twoTargetsWithAuth(t, false)
	other.Auth = &githttp.BasicAuth{Username: "alice", Password: "revoked"}
	_, err := writer.EnsureTarget(context.Background(), other)
	require.Error(t, err, "its Secret now holds a password the remote refuses: not Ready")
	assert.NotContains(t, err.Error(), "revoked")
	_, err = writer.EnsureTarget(context.Background(), other)
	require.Error(t, err, "nor at the controller's retry, until they fetch once")
	_, err = writer.EnsureTarget(context.Background(), live)
	require.NoError(t, err, "the other target's credentials still work")

	other.Auth = &githttp.BasicAuth{Username: "alice", Password: "s3cret"}
	_, err = writer.EnsureTarget(context.Background(), other)
	require.NoError(t, err, "fixed")
}

func TestOneTargetsTroubleStaysItsOwn(t *testing.T) {
	t.Run("a folder that became a file stalls its own target only: the others still register", func(t *testing.T) {
		remote := repotest.NewFileRemote(t)
		remote.Seed("main", map[string]string{"live/README.md": "objects\n", "other/README.md": "objects\n"}, "seed")
		writer, _ := startWriter(t)
		ctx := context.Background()
		live, other := targetSpec(t, "live", remote.URL, nil), targetSpec(t, "other", remote.URL, nil)
		for _, s := range []batch.TargetSpec{live, other} {
			_, err := writer.EnsureTarget(ctx, s)
			require.NoError(t, err)
		}
		co := remote.Clone("main")
		co.Git("rm", "-rq", "other")
		co.WriteFile("other", "now a file\n")
		co.CommitAndPush("main", "a person turns the folder into a file")

		time.Sleep(5100 * time.Millisecond) // the writer fetches at most every 5 s
		_, err := writer.EnsureTarget(ctx, live)
		require.NoError(t, err, "live's registration does not fail because of other's folder")
		st, _ := writer.Status(other.Key)
		assert.False(t, st.Verdict.Supported)
		assert.Contains(t, st.Verdict.Message(), "other is not a folder in Git")
	})

	t.Run("a target whose first registration could not fetch does not crash the others' pushes", func(t *testing.T) {
		remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
		remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
		writer, c := startWriter(t)
		ctx := context.Background()
		live := targetSpec(t, "live", remote.URL, &githttp.BasicAuth{Username: "alice", Password: "s3cret"})
		live.Window = batch.WindowConfig{MaxChanges: 100}
		_, err := writer.EnsureTarget(ctx, live)
		require.NoError(t, err)
		_, err = writer.EnsureTarget(ctx, targetSpec(t, "other", remote.URL, &githttp.BasicAuth{Username: "alice", Password: "wrong"}))
		require.Error(t, err, "other never fetched: it has no index")
		writer.Submit(batch.Change{Target: live.Key, Key: c.put(cmGVR, "ConfigMap", "a", map[string]any{"k": "v"})})
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/a.yaml") },
			10*time.Second, 20*time.Millisecond)
	})

	t.Run("a target that keeps failing does not slow the others of its branch", func(t *testing.T) {
		remote, writer, c, live, other := twoTargetsWithAuth(t, false)
		ctx := context.Background()
		good := live.Auth
		other.Auth = &githttp.BasicAuth{Username: "alice", Password: "read-only"}
		_, _ = writer.EnsureTarget(ctx, other)
		writer.Submit(batch.Change{Target: other.Key, Key: c.put(cmGVR, "ConfigMap", "a", map[string]any{"k": "v"})})
		// other fails and backs off: it retries at about 1, 3 and 7 s, then not before 15 s. The
		// checks below fall between 7.5 and 15 s: well within other's backoff, and clear of
		// its retries, whose pushes would hold the branch's worker for a moment.
		time.Sleep(7500 * time.Millisecond)

		writer.Submit(batch.Change{Target: live.Key, Key: c.put(cmGVR, "ConfigMap", "b", map[string]any{"k": "v"})})
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "live/app/configmaps/b.yaml") },
			3*time.Second, 20*time.Millisecond, "live commits at once, whatever other's backoff")
		st, _ := writer.Status(other.Key)
		assert.NotEmpty(t, st.LastError)

		other.Auth = good // the token is fixed: it is tried at once, not after the backoff
		_, err := writer.EnsureTarget(ctx, other)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "other/app/configmaps/a.yaml") },
			3*time.Second, 20*time.Millisecond, "a fixed token is tried at once, not after the backoff, with no new change to wake it")
	})
}

// twoTargets registers GitTargets live and other on branch main of a remote seeded with
// files, on a started writer, and returns it with their specs.
func twoTargets(t *testing.T, files map[string]string) (*repotest.Remote, *batch.Manager, batch.TargetSpec, batch.TargetSpec) {
	t.Helper()
	remote := repotest.NewFileRemote(t)
	remote.Seed("main", files, "seed")
	writer, _ := startWriter(t)
	live, other := targetSpec(t, "live", remote.URL, nil), targetSpec(t, "other", remote.URL, nil)
	for _, s := range []batch.TargetSpec{live, other} {
		_, err := writer.EnsureTarget(context.Background(), s)
		require.NoError(t, err)
	}
	return remote, writer, live, other
}

func TestAKustomizeFileAboveTheFolderThatListsItsFilesStallsTheTarget(t *testing.T) {
	_, writer, live, other := twoTargets(t, map[string]string{
		"live/app.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: ops\n",
		"other/README.md":    "objects\n",
		"kustomization.yaml": "resources:\n- live/app.yaml\n- base/\n",
	})
	st, _ := writer.Status(live.Key)
	assert.False(t, st.Verdict.Supported, "a file the writer removed would break the build above it")
	assert.Contains(t, st.Verdict.Message(), "kustomization.yaml is a Kustomize file above the folder that refers to live/app.yaml")
	st, _ = writer.Status(other.Key)
	assert.True(t, st.Verdict.Supported, "a folder the Kustomize file does not refer to is fine: %s", st.Verdict.Message())
}

func TestAKustomizeFileElsewhereThatReachesIntoTheFolderStallsTheTargetUntilItLetsGo(t *testing.T) {
	remote, writer, live, other := twoTargets(t, map[string]string{
		"live/app.yaml":                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: ops\n",
		"other/README.md":                  "objects\n",
		"overlays/prod/kustomization.yaml": "resources:\n- ../../live/app.yaml\n",
		"overlays/dev/kustomization.yaml":  "resources: [\n",
	})
	st, _ := writer.Status(live.Key)
	assert.False(t, st.Verdict.Supported, "a file the writer removed would break the overlay's build")
	assert.Contains(t, st.Verdict.Message(), "overlays/prod/kustomization.yaml is a Kustomize file outside the folder that refers to ../../live/app.yaml")
	st, _ = writer.Status(other.Key)
	assert.True(t, st.Verdict.Supported, "a folder no Kustomize file refers to is fine, and a broken one elsewhere is passed over: %s", st.Verdict.Message())

	c := remote.Clone("main")
	c.WriteFile("overlays/prod/kustomization.yaml", "resources:\n- ../../other/\n")
	c.CommitAndPush("main", "the overlay lets go of live")
	require.Eventually(t, func() bool {
		_, err := writer.EnsureTarget(context.Background(), live)
		st, _ := writer.Status(live.Key)
		return err == nil && st.Verdict.Supported
	}, 10*time.Second, 100*time.Millisecond, "the next fetch finds the folder writable")
}
