package batch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// listingResolver is unsyncedResolver that runs onFirst at the first lookup of listed: a
// list that finds the object while the window holding it is being committed.
type listingResolver struct {
	unsyncedResolver
	listed  ObjectKey
	once    sync.Once
	onFirst func()
}

func (r *listingResolver) Current(target types.NamespacedName, k ObjectKey) (*unstructured.Unstructured, error) {
	if k == r.listed {
		r.once.Do(r.onFirst)
	}
	return r.unsyncedResolver.Current(target, k)
}

func TestAListsChangeFoundWhileAWindowWithDeferredObjectsIsPushedIsTheCommitters(t *testing.T) {
	k, obj := clusterConfigMap("k", "1")
	d, _ := clusterConfigMap("d", "x")
	r := &listingResolver{unsyncedResolver: unsyncedResolver{fixedResolver{k: obj}, d}, listed: k}
	m, spec := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"}, Options{Resolver: r})
	r.onFirst = func() { m.Submit(Change{Target: liveKey, Key: k, Relisted: true}) } // someone the webhook did not see changed k
	w := m.workerOf(liveKey)
	m.Submit(Change{Target: liveKey, Key: k, Author: "alice"}, Change{Target: liveKey, Key: d, Author: "alice"})

	_, err := w.flushIfDue(context.Background(), liveKey, 2*time.Hour) // k pushed, d waits for its cache
	require.NoError(t, err)
	obj.Object["data"] = map[string]any{"k": "2"} // what the list saw
	_, err = w.flushIfDue(context.Background(), liveKey, 2*time.Hour)
	require.NoError(t, err)

	log := repotest.Git(t, strings.TrimPrefix(spec.URL, "file://"), "log", "--format=%an", "main")
	assert.Equal(t, []string{"W", "alice", "Fixture Person"}, strings.Split(strings.TrimSpace(log), "\n"),
		"her change, then the list's under the committer, though her deferred object went back to her meanwhile")
}

// A deletion recorded while a window deleting the same object is committed (parked for the
// target being suspended meanwhile, say: it is in no queue) is a newer one: the window's
// push does not drop it from the journal.
func TestADeletionRecordedWhileTheWindowDeletingItIsCommittedStaysInTheJournal(t *testing.T) {
	k, _ := clusterConfigMap("k", "1")
	r := &listingResolver{listed: k}
	m, _ := registeredManagerWith(t, map[string]string{"live/app/configmaps/k.yaml": configMapDoc("k", "1")}, Options{Resolver: r})
	r.onFirst = func() { m.journal.record(Change{Target: liveKey, Key: k, Deleted: true, Author: "bob"}) }
	m.Submit(Change{Target: liveKey, Key: k, Deleted: true, Author: "alice"})

	_, err := m.workerOf(liveKey).flushIfDue(context.Background(), liveKey, 2*time.Hour)

	require.NoError(t, err)
	assert.NotContains(t, filesAtTip(t, m.workerOf(liveKey), "live"), "live/app/configmaps/k.yaml", "her deletion is written")
	_, pending := openJournal(m.opts.WorkDir, logr.Discard(), time.Now())
	require.Contains(t, pending, liveKey, "bob's, recorded while hers was committed, is kept")
	assert.Equal(t, "bob", pending[liveKey][k].Author)
}

// A list compared with Git (a re-list, as at start) finds every object as Git had it at the
// last fetch; a person's commit since removed one's file. The window that settles the list
// with no change asks the remote first, and writes the file back: the committer's, and the
// window of the creator a list names (the first list after the object's creation).
func TestAListFindingNothingToChangeJudgesTheRemotesCurrentTip(t *testing.T) {
	for name, author := range map[string]string{"unattributed": "", "attributed to its creator": "carol"} {
		t.Run(name, func(t *testing.T) {
			k, obj := clusterConfigMap("k", "1")
			m, spec := registeredManagerWith(t, map[string]string{"live/README.md": "objects\n"}, Options{Resolver: fixedResolver{k: obj}})
			bare := strings.TrimPrefix(spec.URL, "file://")
			m.Submit(Change{Target: liveKey, Key: k, Author: "alice"})
			_, err := m.workerOf(liveKey).flushIfDue(context.Background(), liveKey, 2*time.Hour)
			require.NoError(t, err)
			person := t.TempDir()
			repotest.Git(t, person, "clone", "--quiet", "--branch", "main", spec.URL, ".")
			repotest.Git(t, person, "rm", "--quiet", "live/app/configmaps/k.yaml")
			repotest.Git(t, person, "commit", "--quiet", "-m", "a person removes a file")
			repotest.Git(t, person, "push", "--quiet", "origin", "main")
			m.Submit(Change{Target: liveKey, Key: k, Relisted: true, Author: author}) // the re-list, within 5 s of the last fetch

			_, err = m.workerOf(liveKey).flushIfDue(context.Background(), liveKey, 2*time.Hour)

			require.NoError(t, err)
			written, err := repotest.RunGit(t, bare, "show", "main:live/app/configmaps/k.yaml")
			require.NoError(t, err, "written back")
			assert.Contains(t, written, "name: k")
		})
	}
}
