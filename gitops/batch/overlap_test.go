package batch

import (
	"context"
	"testing"
	"time"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestOverlapPlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	repoMain := workerKey{url: "https://git.example/r", branch: "main"}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ops", Name: name} }
	registered := map[types.NamespacedName]place{
		key("apps"):  {wk: repoMain, folder: "apps", created: t0},
		key("infra"): {wk: repoMain, folder: "infra", created: t0.Add(time.Hour)},
		key("other"): {wk: workerKey{url: "https://git.example/r", branch: "staging"}, folder: "apps", created: t0},
	}
	cases := []struct {
		name         string
		key          types.NamespacedName
		me           place
		refused      bool
		wantDisplace []types.NamespacedName
	}{
		{name: "refuses a folder inside an older target's on the same repository and branch",
			key: key("team"), me: place{wk: repoMain, folder: "apps/team-a", created: t0.Add(time.Minute)}, refused: true},
		{name: "refuses a folder around an older target's", key: key("all"), me: place{wk: repoMain, folder: ".", created: t0.Add(time.Minute)}, refused: true},
		{name: "displaces a newer target whose folder lies inside its own",
			key: key("old"), me: place{wk: repoMain, folder: "infra/..", created: t0.Add(-time.Hour)}, wantDisplace: []types.NamespacedName{key("apps"), key("infra")}},
		{name: "leaves alone a folder that only shares a prefix of its name",
			key: key("apps2"), me: place{wk: repoMain, folder: "apps2", created: t0.Add(time.Minute)}},
		{name: "leaves alone the same folder on another branch",
			key: key("x"), me: place{wk: workerKey{url: "https://git.example/r", branch: "dev"}, folder: "apps", created: t0.Add(time.Minute)}},
		{name: "never judges a target against itself", key: key("apps"), me: place{wk: repoMain, folder: "apps", created: t0}},
		{name: "breaks a tie of creation times by name",
			key: key("aaa"), me: place{wk: repoMain, folder: "apps", created: t0}, wantDisplace: []types.NamespacedName{key("apps")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, refuse, displace := overlapPlan(tc.key, tc.me, registered)
			if tc.refused {
				require.ErrorIs(t, refuse, ErrFolderOverlap)
				assert.Contains(t, refuse.Error(), "created earlier")
				return
			}
			require.NoError(t, refuse)
			assert.Equal(t, tc.wantDisplace, displace)
		})
	}
}

// AWS CodeCommit takes the SSH key's ID as the user: two GitProviders with keys of their own
// name one repository with two users.
func TestTargetsDiallingOneRepositoryAsTwoSSHUsersShareItsWorkerAndFolders(t *testing.T) {
	a := TargetSpec{Key: types.NamespacedName{Namespace: "ops", Name: "a"}, URL: "ssh://APKAEXAMPLE1@git-codecommit.example/v1/repos/live",
		Branch: "main", Folder: "live", Created: time.Unix(1000, 0)}
	b := a
	b.Key, b.URL, b.Created = types.NamespacedName{Namespace: "ops", Name: "b"}, "APKAEXAMPLE2@git-codecommit.example:v1/repos/live.git", time.Unix(2000, 0)
	require.Equal(t, workerKeyOf(a), workerKeyOf(b), "one worker: two would race on every push")
	_, refuse, _ := overlapPlan(b.Key, place{wk: workerKeyOf(b), folder: b.Folder, created: b.Created},
		map[types.NamespacedName]place{a.Key: {wk: workerKeyOf(a), folder: a.Folder, created: a.Created}})
	require.ErrorIs(t, refuse, ErrFolderOverlap)
}

func TestTwoTargetsOnOverlappingFoldersLeaveTheFolderToTheOlder(t *testing.T) {
	var told []types.NamespacedName
	m, older := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"},
		Options{OnStatus: func(k types.NamespacedName) { told = append(told, k) }})
	older.Created = time.Unix(1000, 0)
	_, err := m.EnsureTarget(context.Background(), older)
	require.NoError(t, err)

	newer := older
	newer.Key, newer.Folder, newer.Created = types.NamespacedName{Namespace: "ops", Name: "team"}, "live/team-a", time.Unix(2000, 0)
	_, err = m.EnsureTarget(context.Background(), newer)
	require.ErrorIs(t, err, ErrFolderOverlap, "created within admission's cache lag, or with the webhook off")
	_, registered := m.Status(newer.Key)
	assert.False(t, registered)

	m.RemoveTarget(older.Key)
	_, err = m.EnsureTarget(context.Background(), newer)
	require.NoError(t, err, "the older gone, the folder is the newer's")
	_, err = m.EnsureTarget(context.Background(), older) // created again, older by its timestamp (a restart's order)
	require.NoError(t, err)
	_, registered = m.Status(newer.Key)
	assert.False(t, registered, "the older target displaces the newer, which stops writing")
	assert.Contains(t, told, newer.Key, "and its controller is told")
}

// keptOutScene registers older at "live" and has newer, at "live/team-a" and created
// later, refused for overlapping it; told collects the targets the Manager tells about
// from then on.
func keptOutScene(t *testing.T) (m *Manager, older, newer TargetSpec, told *[]types.NamespacedName) {
	t.Helper()
	told = &[]types.NamespacedName{}
	recording := false
	m, older = registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"},
		Options{OnStatus: func(k types.NamespacedName) {
			if recording {
				*told = append(*told, k)
			}
		}})
	older.Created = time.Unix(1000, 0)
	_, err := m.EnsureTarget(context.Background(), older)
	require.NoError(t, err)
	newer = older
	newer.Key, newer.Folder, newer.Created = types.NamespacedName{Namespace: "ops", Name: "team"}, "live/team-a", time.Unix(2000, 0)
	_, err = m.EnsureTarget(context.Background(), newer)
	require.ErrorIs(t, err, ErrFolderOverlap)
	recording = true
	return m, older, newer, told
}

// A target refused for overlapping an older one's folder is told when the older lets it go,
// not left until its controller's next poll (a minute of admission denials).
func TestATargetKeptOutOfAFolderIsToldWhenItsHolderLetsItGo(t *testing.T) {
	elsewhere := repotest.NewFileRemote(t)
	elsewhere.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	for name, letGo := range map[string]func(m *Manager, older TargetSpec){
		"deleted": func(m *Manager, older TargetSpec) { m.RemoveTarget(older.Key) },
		"moved to another repository (its GitProvider changed)": func(m *Manager, older TargetSpec) {
			older.URL = elsewhere.URL
			_, err := m.EnsureTarget(context.Background(), older)
			require.NoError(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, older, newer, told := keptOutScene(t)

			letGo(m, older)

			assert.Contains(t, *told, newer.Key)
			_, err := m.EnsureTarget(context.Background(), newer)
			assert.NoError(t, err, "and registers when its controller tries")
		})
	}
	for name, keep := range map[string]func(m *Manager, older TargetSpec){
		"re-registered in place (its poll)": func(m *Manager, older TargetSpec) {
			_, err := m.EnsureTarget(context.Background(), older)
			require.NoError(t, err)
		},
		// The GitTarget controller keeps a suspended target's folder (controller.FolderHolder).
		"suspended": func(m *Manager, older TargetSpec) { m.SuspendTarget(older.Key, "its GitProvider is gone") },
	} {
		t.Run("not told while the holder keeps the folder: "+name, func(t *testing.T) {
			m, older, newer, told := keptOutScene(t)
			keep(m, older)
			assert.NotContains(t, *told, newer.Key)
		})
	}
}

// A target displaced by an older one holds no folder any more: those it kept out are told,
// and their controllers judge them against the older one.
func TestTheTargetsADisplacedTargetKeptOutAreTold(t *testing.T) {
	m, middle, newest, told := keptOutScene(t)
	oldest := middle
	oldest.Key, oldest.Created = types.NamespacedName{Namespace: "ops", Name: "oldest"}, time.Unix(500, 0)

	_, err := m.EnsureTarget(context.Background(), oldest) // created while the operator was down, say

	require.NoError(t, err)
	assert.Contains(t, *told, middle.Key, "displaced")
	assert.Contains(t, *told, newest.Key, "kept out by the displaced one")
}
