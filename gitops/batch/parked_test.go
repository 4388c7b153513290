package batch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parkedOf is the number of changes kept for suspended target liveKey.
func (m *Manager) parkedOf() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parked[liveKey])
}

// collapsedOnce says whether collapseParked has looked at liveKey's kept changes and is
// done.
func (m *Manager) collapsedOnce() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.judges[liveKey]
	return j != nil && !j.lookedAt.IsZero() && !j.looking
}

// lookSoon lets the next change kept for liveKey start a look at the kept changes, as one
// does collapseEvery after the suspension.
func (m *Manager) lookSoon() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.judges[liveKey].lookedAt = time.Time{}
}

// gone is a ConfigMap the cluster does not have (created and deleted, or never seen).
func gone(name string) ObjectKey {
	k, _ := clusterConfigMap(name, "v")
	return k
}

func TestWhileATargetIsSuspendedChangesThatChangeNothingInGitAreForgotten(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/app/configmaps/kept.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: app\ndata:\n  k: v\n"})
	running, runningObj := clusterConfigMap("running", "v")
	s.cluster[running] = runningObj
	s.m.SuspendTarget(liveKey, "its GitProvider is gone")
	s.m.lookSoon()

	s.m.Submit( // what admission lets through to a Stalled target: GitOps controllers' hook Jobs, say
		Change{Target: liveKey, Key: gone("job-x1"), Deleted: true, Author: "argocd"},
		Change{Target: liveKey, Key: gone("job-x2"), Deleted: true, Author: "argocd"},
		Change{Target: liveKey, Key: gone("pod-y"), Author: "job-controller"}, // under a rule without DELETE
		Change{Target: liveKey, Key: gone("kept"), Deleted: true, Author: "alice"},
		Change{Target: liveKey, Key: running, Author: "argocd"})
	require.Eventually(t, s.m.collapsedOnce, 10*time.Second, 10*time.Millisecond)

	assert.Equal(t, 2, s.m.parkedOf(), "the delete of what Git has, and the object the cluster has, are kept")
	assert.True(t, s.journaled(gone("kept")))
	assert.False(t, s.journaled(gone("job-x1")), "nothing to remove, nothing to recover after a restart")
	s.register(t)
	s.flush(t)
	tree := s.remote.LsTree("main")
	assert.NotContains(t, tree, "configmaps/kept.yaml", "the delete that matters lands when it comes back")
	assert.Contains(t, tree, "live/app/configmaps/running.yaml")
}

func TestATargetSuspendedWhileAPushMayHaveLandedForgetsNoDelete(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	k, obj := clusterConfigMap("job-x1", "v")
	s.cluster[k] = obj
	s.m.Submit(Change{Target: liveKey, Key: k, Author: "job-controller"})
	s.lose.Store(true)
	s.flushFails(t)
	require.Contains(t, s.remote.LsTree("main"), "configmaps/job-x1.yaml", "it landed; its answer was lost")
	s.m.SuspendTarget(liveKey, "its GitProvider is gone")
	s.m.lookSoon()
	delete(s.cluster, k)

	s.m.Submit(Change{Target: liveKey, Key: k, Deleted: true, Author: "job-controller"},
		Change{Target: liveKey, Key: gone("pod-y"), Author: "job-controller"})
	require.Eventually(t, s.m.collapsedOnce, 10*time.Second, 10*time.Millisecond)

	assert.Equal(t, 1, s.m.parkedOf(), "the commit in doubt may hold the document: its delete is kept")
	assert.True(t, s.journaled(k))
	s.down.Store(false)
	s.register(t)
	s.flush(t)
	assert.NotContains(t, s.remote.LsTree("main"), "configmaps/job-x1.yaml", "the delete lands")
}

func TestWhileATargetIsSuspendedAChangeKeptWhileItsObjectIsLookedAtIsNotForgotten(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	s.m.SuspendTarget(liveKey, "its GitProvider is gone")
	k, obj := clusterConfigMap("web-0", "v")
	s.m.Submit(Change{Target: liveKey, Key: k, Deleted: true, Author: "statefulset-controller"})
	s.looked = func(looked ObjectKey) {
		if looked == k && s.cluster[k] == nil {
			s.cluster[k] = obj // created again just after the look found it gone
			s.m.Submit(Change{Target: liveKey, Key: k, Author: "statefulset-controller"})
		}
	}

	s.m.collapseParked(liveKey)

	assert.Equal(t, 1, s.m.parkedOf(), "the object's change since the look keeps it")
}

func TestASuspendedTargetThatComesBackElsewhereIsNoLongerJudgedByItsOldFolder(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	s.m.SuspendTarget(liveKey, "its GitProvider is gone")
	s.m.mu.Lock()
	require.NotNil(t, s.m.judges[liveKey])
	s.m.mu.Unlock()
	moved := s.spec
	moved.Folder, moved.Branch = "elsewhere", "other"
	dir := s.m.cloneDir(workerKeyOf(moved)) // its clone there cannot be opened: something else is in the way
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a clone\n"), 0o600))

	_, err := s.m.EnsureTarget(context.Background(), moved)

	require.ErrorContains(t, err, "opening the local clone")
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	assert.NotNil(t, s.m.parked[liveKey], "its changes are kept for its next registration")
	assert.Nil(t, s.m.judges[liveKey], "the old folder's index tells nothing of the new one")
}
