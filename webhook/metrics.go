package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the admission front door.
type Metrics struct {
	Verdicts *prometheus.CounterVec
	Latency  prometheus.Histogram
}

// NewMetrics creates the collectors and registers them with reg (controller-runtime's
// registry in the manager, so /metrics serves them).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitops_reverser_admission_verdicts_total",
			Help: "Admission verdicts on watched objects, by outcome (allowed/denied/errored), reason and dry-run.",
		}, []string{"verdict", "reason", "dry_run"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gitops_reverser_admission_decision_seconds",
			Help: "Time to decide an admission request on a watched object, decoding included.",
			// Up to the API server's longest webhook timeout, so a slow decision is seen.
			Buckets: []float64{0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 3, 10, 30},
		}),
	}
	for _, c := range []prometheus.Collector{m.Verdicts, m.Latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
