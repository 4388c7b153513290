package batch

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
