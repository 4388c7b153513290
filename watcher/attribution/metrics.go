package attribution

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics show how many stored changes found their author, so an operator notices when
// attribution silently stops working (webhook skipped, failurePolicy Ignore timing out).
type Metrics struct {
	Joins   *prometheus.CounterVec
	Records prometheus.GaugeFunc
	// Forwards counts records sent by a non-leader replica to the leader, by result.
	Forwards *prometheus.CounterVec
	// WatchLag times, for each create or update joined to its record, the record to its
	// event: how far the watch runs behind the API server, which the writer's own latency
	// histograms, timed from the change reaching it, do not see.
	WatchLag prometheus.Histogram
}

// NewMetrics registers the collectors with reg; book feeds the records gauge.
func NewMetrics(reg prometheus.Registerer, book *Book) (*Metrics, error) {
	m := &Metrics{
		Joins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitops_reverser_attribution_joins_total",
			Help: "Watched changes by whether their author was joined from an admission record (joined) or not (unattributed).",
		}, []string{"result"}),
		Records: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gitops_reverser_attribution_records",
			Help: "Admission records waiting for their change to be watched.",
		}, func() float64 { return float64(book.Len()) }),
		Forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitops_reverser_attribution_forwards_total",
			Help: "Admission records a non-leader replica sent to the leader, by result (ok/failed).",
		}, []string{"result"}),
	}
	m.WatchLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gitops_reverser_watch_lag_seconds",
		Help:    "From the admission record of a create or update to its watch event reaching the watcher: how far the watch runs behind the API server.",
		Buckets: prometheus.ExponentialBucketsRange(0.001, 300, 16),
	})
	for _, c := range []prometheus.Collector{m.Joins, m.Records, m.Forwards, m.WatchLag} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe counts one join attempt; a nil Metrics counts nothing.
func (m *Metrics) Observe(joined bool) {
	if m == nil {
		return
	}
	result := "unattributed"
	if joined {
		result = "joined"
	}
	m.Joins.WithLabelValues(result).Inc()
}

// Lagged times the watch's lag for a change of op joined to a: from a's record to now.
// A delete is left out: its event waits for finalizers and grace periods, not for the
// watch. So is an Author no record was joined for, or an ambiguous record's (no username:
// its time is the second request's). A nil Metrics times nothing.
func (m *Metrics) Lagged(op Op, a Author, now time.Time) {
	if m == nil || op == Delete || a.Username == "" || a.RecordedAt.IsZero() {
		return
	}
	m.WatchLag.Observe(max(now.Sub(a.RecordedAt), 0).Seconds())
}

func (m *Metrics) forwarded(ok bool) {
	if m == nil {
		return
	}
	result := "failed"
	if ok {
		result = "ok"
	}
	m.Forwards.WithLabelValues(result).Inc()
}
