package batch

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestBuiltCommitTimesEveryBuildButTheChangeOnlyAtItsFirstCommit(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)

	m.builtCommit(2*time.Millisecond, 5*time.Second, true)
	m.builtCommit(3*time.Millisecond, 6*time.Second, false) // a replay after a conflict

	assert.Equal(t, uint64(2), sampleCount(t, m.CommitBuild))
	assert.Equal(t, uint64(1), sampleCount(t, m.ChangeToCommit))
}

func wrap(c prometheus.Collector) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return reg
}

func sampleCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	families, err := wrap(h).Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	return families[0].GetMetric()[0].GetHistogram().GetSampleCount()
}

func TestPendingChangesLeaveTheGaugeWithTheirTarget(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	key := workerKey{url: "https://git.example/repo.git", branch: "main"}
	w := newWorker(key, nil, Options{Metrics: m}, func(*CommitRequest, RequestOutcome) {})
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	q := w.openQueue(target)
	w.qmu.Lock()
	q.add(qkey("a"), mirrorsDeletes, "alice", time.Now())
	q.add(qkey("b"), mirrorsDeletes, "alice", time.Now())
	w.qmu.Unlock()
	w.reportPending()
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Pending.WithLabelValues(key.url, key.branch)))

	moved := w.removeTarget(target, false)
	assert.Len(t, moved, 2)
	assert.Zero(t, testutil.ToFloat64(m.Pending.WithLabelValues(key.url, key.branch)), "they went with the target to its next worker")
}
