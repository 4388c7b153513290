package batch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// outageScene is a registered target on an HTTP remote the test can take down, or make lose
// the answer to the next push (it lands; then the remote is down), and a cluster to change.
type outageScene struct {
	m       *Manager
	w       *worker
	spec    TargetSpec
	remote  *repotest.Remote
	cluster fixedResolver
	// looked, when set, runs after each lookup of the cluster, as events may arrive then.
	looked func(ObjectKey)
	down   atomic.Bool
	lose   atomic.Bool
}

func newOutageScene(t *testing.T, seed map[string]string) *outageScene {
	t.Helper()
	s := &outageScene{cluster: fixedResolver{}}
	s.remote = repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.lose.Load() && repotest.IsReceivePack(r) {
				next.ServeHTTP(httptest.NewRecorder(), r) // the push lands ...
				s.lose.Store(false)
				s.down.Store(true) // ... and the remote goes away before it answers
			}
			if s.down.Load() {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	s.remote.Seed("main", seed, "seed")
	msgs, err := ParseMessages("", "")
	require.NoError(t, err)
	s.m = NewManager(Options{Log: logr.Discard(), WorkDir: t.TempDir(), Resolver: sceneResolver{s}})
	s.spec = TargetSpec{Key: liveKey, URL: s.remote.URL, Branch: "main", Folder: "live",
		Messages: msgs, Window: WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}, Committer: Identity{Name: "W", Email: "w@example.com"}}
	s.register(t)
	return s
}

// register registers the scene's target, again after a suspension.
func (s *outageScene) register(t *testing.T) {
	t.Helper()
	_, err := s.m.EnsureTarget(context.Background(), s.spec)
	require.NoError(t, err)
	s.w = s.m.workerOf(liveKey)
}

// sceneResolver reads the scene's cluster, then runs its looked hook (on Current, which the
// look asks only of what it does not hold).
type sceneResolver struct{ s *outageScene }

func (r sceneResolver) Current(target types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	obj, err := r.s.cluster.Current(target, k)
	if r.s.looked != nil {
		r.s.looked(k)
	}
	return obj, err
}

// Holds implements Holder, as the watcher does: the look spares a copy of what is there.
func (r sceneResolver) Holds(_ types.NamespacedName, k ObjectKey) bool { return r.s.cluster[k] != nil }

// flush commits every window now, as if their time had come.
func (s *outageScene) flush(t *testing.T) {
	t.Helper()
	_, err := s.w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)
}

// flushFails is flush whose commit fails: the remote is away.
func (s *outageScene) flushFails(t *testing.T) {
	t.Helper()
	_, err := s.w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.Error(t, err)
}

// collapse runs a pass of the target while it backs off, as the worker does between retries.
func (s *outageScene) collapse(t *testing.T) {
	t.Helper()
	s.w.mu.Lock()
	tg := s.w.targets[liveKey]
	require.False(t, tg.retryAt.IsZero(), "the target backs off: its last commit failed")
	tg.retryAt = time.Now().Add(time.Hour) // however long this machine took since
	tg.collapsedAt = time.Time{}           // whatever pass looked last
	s.w.mu.Unlock()
	_, err := s.w.flushIfDue(context.Background(), liveKey, 0)
	require.NoError(t, err)
}

// journaled says whether the journal keeps a deletion of k for the target.
func (s *outageScene) journaled(k ObjectKey) bool {
	s.m.journal.mu.Lock()
	defer s.m.journal.mu.Unlock()
	_, ok := s.m.journal.live[journalKey{target: liveKey, key: k}]
	return ok
}

func TestWhileCommitsFailChangesOfGoneObjectsWhoseDeleteIsNotMirroredAreForgotten(t *testing.T) {
	written := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: in-git\n  namespace: app\ndata:\n  k: v\n"
	s := newOutageScene(t, map[string]string{"live/app/configmaps/in-git.yaml": written})
	running, runningObj := clusterConfigMap("running", "v")
	s.cluster[running] = runningObj
	inGit, _ := clusterConfigMap("in-git", "v")
	s.down.Store(true)
	// A rule that mirrors creations and updates, not deletions: the objects' deletes never come.
	s.m.Submit(Change{Target: liveKey, Key: running, Author: "job-controller"})
	s.m.Submit(Change{Target: liveKey, Key: inGit, Author: "alice"})
	for _, name := range []string{"pod-x1", "pod-x2", "pod-x3"} { // created, changed and gone while Git is away
		k, _ := clusterConfigMap(name, "v")
		s.m.Submit(Change{Target: liveKey, Key: k, Author: "job-controller"})
	}
	s.flushFails(t)
	require.Equal(t, 5, s.m.pendingOf(liveKey))

	s.collapse(t)

	assert.Equal(t, 1, s.m.pendingOf(liveKey), "only the object the cluster still has waits: the others' plans would change nothing")
	s.down.Store(false)
	s.flush(t)
	assert.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/running.yaml")
	assert.Equal(t, written, s.remote.Show("main", "live/app/configmaps/in-git.yaml")+"\n", "a document whose delete is not mirrored stays")
	assert.Equal(t, 0, s.m.pendingOf(liveKey))
}

// A delete of the object kept elsewhere while the worker looks (parked by a suspension
// that waits for the worker's lock) records its own line: the forgotten delete's removal
// leaves it. The test records it from the look's hook, as Submit's parking does.
func TestWhileCommitsFailAForgottenDeleteLeavesALineRecordedSinceInTheJournal(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	k := gone("job-x1")
	running, runningObj := clusterConfigMap("running", "v")
	s.cluster[running] = runningObj
	s.down.Store(true)
	s.m.Submit(Change{Target: liveKey, Key: running, Author: "job-controller"},
		Change{Target: liveKey, Key: k, Deleted: true, Author: "job-controller"})
	s.flushFails(t)
	s.looked = func(looked ObjectKey) {
		if looked == k {
			s.m.journal.record(Change{Target: liveKey, Key: k, Deleted: true, Author: "job-controller"})
		}
	}

	s.collapse(t)

	assert.Equal(t, 1, s.m.pendingOf(liveKey), "the queue's delete is forgotten")
	assert.True(t, s.journaled(k), "the line recorded since is another change's")
}

func TestWhileCommitsFailDeletesThatChangeNothingInGitAreForgotten(t *testing.T) {
	kept, keptObj := clusterConfigMap("kept", "v")
	s := newOutageScene(t, map[string]string{"live/app/configmaps/kept.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: app\ndata:\n  k: v\n"})
	s.cluster[kept] = keptObj
	running, runningObj := clusterConfigMap("job-running", "v")
	s.cluster[running] = runningObj
	s.down.Store(true)
	s.m.Submit(Change{Target: liveKey, Key: running, Author: "job-controller"})
	var pods []ObjectKey
	for _, name := range []string{"job-x1", "job-x2", "job-x3"} { // created and deleted while Git is away
		k, _ := clusterConfigMap(name, "v")
		s.m.Submit(Change{Target: liveKey, Key: k, Author: "job-controller"})
		s.m.Submit(Change{Target: liveKey, Key: k, Deleted: true, Author: "job-controller"})
		pods = append(pods, k)
	}
	delete(s.cluster, kept)
	s.m.Submit(Change{Target: liveKey, Key: kept, Deleted: true, Author: "alice"})
	s.flushFails(t)
	require.Equal(t, 5, s.m.pendingOf(liveKey))

	s.collapse(t)

	assert.Equal(t, 2, s.m.pendingOf(liveKey), "the running job and the delete of what Git has wait")
	assert.True(t, s.journaled(kept))
	for _, k := range pods {
		assert.False(t, s.journaled(k), "%s: nothing to remove, nothing to recover after a restart", k.Name)
	}
	s.down.Store(false)
	s.flush(t)
	assert.NotContains(t, s.remote.LsTree("main"), "configmaps/kept.yaml", "the delete that matters lands")
	assert.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/job-running.yaml")
	assert.Equal(t, 0, s.m.pendingOf(liveKey))
}

func TestWhileCommitsFailADeleteOfAnObjectCreatedAgainIsKept(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	s.down.Store(true)
	k, obj := clusterConfigMap("web-0", "v")
	other, otherObj := clusterConfigMap("other", "v")
	s.cluster[other] = otherObj
	s.m.Submit(Change{Target: liveKey, Key: other, Author: "alice"}, Change{Target: liveKey, Key: k, Deleted: true, Author: "statefulset-controller"})
	s.flushFails(t)
	s.cluster[k] = obj // created again under its name; its create merges into the waiting delete
	s.m.Submit(Change{Target: liveKey, Key: k, Author: "statefulset-controller"})

	s.collapse(t)

	require.Equal(t, 2, s.m.pendingOf(liveKey), "the object exists: its document is written once Git is back")
	s.down.Store(false)
	s.flush(t)
	assert.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/web-0.yaml")
}

// deletedAfterALostAnswer has creator make ConfigMap job-x1, whose push lands and loses its
// answer (the index does not show it), then deleter delete it, and runs a collapse pass.
func deletedAfterALostAnswer(t *testing.T, creator, deleter string) (*outageScene, ObjectKey) {
	t.Helper()
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	k, obj := clusterConfigMap("job-x1", "v")
	s.cluster[k] = obj
	s.m.Submit(Change{Target: liveKey, Key: k, Author: creator})
	s.lose.Store(true)
	s.flushFails(t)
	require.Contains(t, s.remote.LsTree("main"), "configmaps/job-x1.yaml")
	delete(s.cluster, k)
	s.m.Submit(Change{Target: liveKey, Key: k, Deleted: true, Author: deleter})
	s.collapse(t)
	return s, k
}

func TestWhileAPushMayHaveLandedNoDeleteIsForgotten(t *testing.T) {
	s, k := deletedAfterALostAnswer(t, "job-controller", "job-controller")

	require.Equal(t, 1, s.m.pendingOf(liveKey), "the commit in doubt may hold its document")
	assert.True(t, s.journaled(k))
	s.down.Store(false)
	s.flush(t)
	assert.False(t, strings.Contains(s.remote.LsTree("main"), "configmaps/job-x1.yaml"), "the delete lands")
}

func TestAnObjectAPushInDoubtWroteIsRemovedWhenAnotherAuthorDeletesIt(t *testing.T) {
	// Deleted by another: the object leaves ci's window, whose commit was in doubt.
	s, k := deletedAfterALostAnswer(t, "ci", "ttl-controller")

	require.Equal(t, 1, s.m.pendingOf(liveKey), "the target's commit in doubt may hold its document, whichever window holds it now")
	assert.True(t, s.journaled(k))
	s.down.Store(false)
	s.flush(t)
	assert.NotContains(t, s.remote.LsTree("main"), "configmaps/job-x1.yaml", "the delete's window looks at the branch first")
}

func TestARequestWhoseDeletesWereForgottenReadsThatItsChangesLeftTheFolderAsItWas(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	s.down.Store(true)
	other, otherObj := clusterConfigMap("other", "v")
	s.cluster[other] = otherObj
	s.m.Submit(Change{Target: liveKey, Key: other, Author: "bob"}) // fails first, holding alice's window back
	k, _ := clusterConfigMap("scratch", "v")
	s.m.Submit(Change{Target: liveKey, Key: k, Author: "alice"}, Change{Target: liveKey, Key: k, Deleted: true, Author: "alice"})
	req := CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "note"}, Target: liveKey, Author: "alice",
		Message: "try a scratch config", Deadline: time.Now().Add(time.Hour)}
	_, err := s.m.Request(req)
	require.NoError(t, err)
	s.flushFails(t)
	s.collapse(t)
	require.Equal(t, 1, s.m.pendingOf(liveKey), "bob's change waits; alice's delete changed nothing")

	s.down.Store(false)
	s.flush(t)
	out, err := s.m.Request(req)
	require.NoError(t, err)
	assert.Equal(t, ReasonNothingToCommit, out.Reason)
	assert.Contains(t, out.Message, "left GitTarget ops/live's folder as it was", "not overtaken by someone else")
}

func TestWhileCommitsFailADeleteOfAnObjectCreatedAgainWhileTheWorkerLooksIsKept(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	s.down.Store(true)
	other, otherObj := clusterConfigMap("other", "v")
	s.cluster[other] = otherObj
	k, obj := clusterConfigMap("web-0", "v")
	s.m.Submit(Change{Target: liveKey, Key: other, Author: "alice"}, Change{Target: liveKey, Key: k, Deleted: true, Author: "statefulset-controller"})
	s.flushFails(t)
	s.looked = func(looked ObjectKey) {
		if looked == k && s.cluster[k] == nil {
			// Created again just after the worker found it gone: its event arrives before the
			// worker forgets the delete.
			s.cluster[k] = obj
			s.m.Submit(Change{Target: liveKey, Key: k, Author: "statefulset-controller"})
		}
	}

	s.collapse(t)

	require.Equal(t, 2, s.m.pendingOf(liveKey), "the object's change since the look keeps it")
	s.looked = nil
	s.down.Store(false)
	s.flush(t)
	assert.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/web-0.yaml")
}

// A server that declines every push (a protected branch) sets no backoff on the target,
// only on the declined window: its pass forgets the gone objects' changes all the same.
func TestWhileTheServerDeclinesEveryPushChangesOfGoneObjectsAreForgottenToo(t *testing.T) {
	s := newOutageScene(t, map[string]string{"live/README.md": "objects\n"})
	hook := filepath.Join(s.remote.Dir, "hooks", "pre-receive")
	require.NoError(t, os.MkdirAll(filepath.Dir(hook), 0o755))
	require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\necho 'main is protected' >&2\nexit 1\n"), 0o755))
	running, runningObj := clusterConfigMap("running", "v")
	s.cluster[running] = runningObj
	s.m.Submit(Change{Target: liveKey, Key: running, Author: "job-controller"})
	for _, name := range []string{"pod-x1", "pod-x2", "pod-x3"} { // created and gone; their deletes are not mirrored
		k, _ := clusterConfigMap(name, "v")
		s.m.Submit(Change{Target: liveKey, Key: k, Author: "job-controller"})
	}
	_, _ = s.w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.Equal(t, 4, s.m.pendingOf(liveKey))
	s.w.mu.Lock()
	tg := s.w.targets[liveKey]
	require.Contains(t, tg.st.LastError, "main is protected")
	require.True(t, tg.retryAt.IsZero(), "a decline holds back its window, not the target")
	tg.collapsedAt = time.Time{} // whatever pass looked last
	s.w.mu.Unlock()

	_, err := s.w.flushIfDue(context.Background(), liveKey, 0)
	require.NoError(t, err)

	assert.Equal(t, 1, s.m.pendingOf(liveKey), "only the object the cluster still has waits")
	require.NoError(t, os.Remove(hook))
	s.flush(t)
	assert.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/running.yaml")
	assert.Equal(t, 0, s.m.pendingOf(liveKey))
}
