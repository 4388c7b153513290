package watcher

import (
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// lockedSnapshots records, safely across goroutines, what the watcher hands the writer.
type lockedSnapshots struct {
	mu      sync.Mutex
	got     []batch.Snapshot
	changes []batch.Change
}

func (s *lockedSnapshots) Submit(chs ...batch.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, chs...)
}

func (s *lockedSnapshots) Snapshot(snap batch.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, snap)
}

func (s *lockedSnapshots) snapshots() []batch.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]batch.Snapshot(nil), s.got...)
}

// An informer that has not synced stands for a list that keeps failing (a conversion webhook
// down); it is started by hand once the rule has changed, which a real API server could not
// be made to do on cue.
func TestASnapshotWaitingForItsListFollowsTheRulesAsTheyAreOnceItHasIt(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	claim := func(del bool) Claim {
		return Claim{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true}, Namespace: "team-a",
			ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: del}
	}
	sink := &lockedSnapshots{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	inf := listedInformer(t, false, configMap("team-a", "app", nil))
	w.informers[gvr] = inf
	w.byGVR[gvr] = []Claim{claim(true)}
	close(w.started)

	w.Resync(target)
	time.Sleep(100 * time.Millisecond) // the resync reads the claims, then waits for the list
	w.mu.Lock()
	w.byGVR[gvr] = []Claim{claim(false)} // the rule no longer mirrors deletions
	w.mu.Unlock()
	go inf.inf.Run(inf.ctx.Done())

	require.Eventually(t, func() bool { return len(sink.snapshots()) == 1 }, 10*time.Second, 10*time.Millisecond)
	snap := sink.snapshots()[0]
	assert.True(t, snap.InScope("team-a"))
	assert.False(t, snap.Prunable("team-a", nil), "what the rule keeps now is not pruned by the rule it was")
}
