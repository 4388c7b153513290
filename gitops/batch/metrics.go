package batch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the Git writer. A nil *Metrics records nothing.
type Metrics struct {
	// ChangeToPush is the time from an object being marked dirty (its window opening) to the
	// push that delivered it.
	ChangeToPush prometheus.Histogram
	// ChangeToCommit is the time from an object being marked dirty (its window opening) to
	// the first commit built for it: the window's wait plus the build.
	ChangeToCommit prometheus.Histogram
	// CommitToPush is the time from the window's first commit being built to the push that
	// delivered it, through every retry.
	CommitToPush prometheus.Histogram
	// CommitBuild is the time spent building one commit (planning the file edits, blobs,
	// trees): the writer's own cost, which should follow the size of the change, not of the
	// repository.
	CommitBuild prometheus.Histogram
	// Pushes counts pushes per repository and branch by outcome: pushed, conflict (remote
	// moved, writes replayed), failed (a remote that moved on the last attempt included).
	Pushes *prometheus.CounterVec
	// Pending is the number of objects not yet pushed per worker (repository and branch):
	// waiting in a window, or in one being committed and pushed.
	Pending *prometheus.GaugeVec
	// OldestPending is the Unix time the oldest change a worker has not yet pushed was
	// recorded (0 when none waits): under a steady trickle Pending never falls to zero, and
	// what tells a stalled delivery from a busy one is how old the oldest change is. A
	// timestamp, not an age, so it needs no update between changes (time() - it is the age).
	OldestPending *prometheus.GaugeVec
	// Failures counts windows whose commit failed at any stage (fetch, plan, commit, push)
	// and are retried with backoff, per repository and branch: what a push counter alone
	// misses when nothing gets as far as a push.
	Failures *prometheus.CounterVec
	// Repairs counts local clones found damaged and rebuilt.
	Repairs prometheus.Counter
}

// NewMetrics creates the writer's collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	// Up to an hour: backoff alone reaches 2 minutes, the Git timeout is 2 minutes, and
	// maxDelay is the user's; the slow deliveries are the ones to see.
	buckets := []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	m := &Metrics{
		ChangeToPush: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gitops_reverser_change_to_push_seconds",
			Help: "Time from a change being recorded to the push that delivered it.", Buckets: buckets}),
		ChangeToCommit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gitops_reverser_change_to_commit_seconds",
			Help: "Time from a change being recorded to the first commit built for it.", Buckets: buckets}),
		CommitToPush: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gitops_reverser_commit_to_push_seconds",
			Help: "Time from a window's first commit being built to its push succeeding, through every retry of a failed push.", Buckets: buckets}),
		CommitBuild: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gitops_reverser_commit_build_seconds",
			Help:    "Time to build one commit: plan the file edits, write blobs and trees (no waiting, no push).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}),
		Pushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gitops_reverser_git_pushes_total",
			Help: "Pushes per repository and branch by outcome: pushed, conflict (remote moved; writes replayed), failed."},
			[]string{"repository", "branch", "outcome"}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gitops_reverser_pending_changes",
			Help: "Objects not yet pushed (waiting, or in a commit being pushed), per repository and branch."}, []string{"repository", "branch"}),
		OldestPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gitops_reverser_oldest_pending_change_timestamp_seconds",
			Help: "Unix time the oldest change not yet pushed was recorded, per repository and branch; 0 when none waits."},
			[]string{"repository", "branch"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gitops_reverser_commit_failures_total",
			Help: "Windows whose commit failed at any stage (fetch, plan, commit, push) and are retried with backoff, and registrations of a target whose branch was never read while changes wait on it, per repository and branch."},
			[]string{"repository", "branch"}),
		Repairs: prometheus.NewCounter(prometheus.CounterOpts{Name: "gitops_reverser_clone_repairs_total",
			Help: "Local clones found damaged (e.g. after a crash) and rebuilt from the remote."}),
	}
	for _, c := range []prometheus.Collector{m.ChangeToPush, m.ChangeToCommit, m.CommitToPush, m.CommitBuild, m.Pushes, m.Pending, m.OldestPending, m.Failures, m.Repairs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) push(k workerKey, outcome string) {
	if m != nil {
		m.Pushes.WithLabelValues(k.url, k.branch, outcome).Inc()
	}
}

// pending records how many objects wait on a worker and when the oldest of its changes not
// yet pushed was recorded (zero when none).
func (m *Metrics) pending(k workerKey, n int, oldest time.Time) {
	if m != nil {
		m.Pending.WithLabelValues(k.url, k.branch).Set(float64(n))
		since := 0.0
		if !oldest.IsZero() {
			since = float64(oldest.UnixNano()) / 1e9
		}
		m.OldestPending.WithLabelValues(k.url, k.branch).Set(since)
	}
}

// forget removes the series of a retired worker.
func (m *Metrics) forget(k workerKey) {
	if m != nil {
		m.Pending.DeleteLabelValues(k.url, k.branch)
		m.OldestPending.DeleteLabelValues(k.url, k.branch)
		m.Pushes.DeletePartialMatch(prometheus.Labels{"repository": k.url, "branch": k.branch})
		m.Failures.DeleteLabelValues(k.url, k.branch)
	}
}

func (m *Metrics) failed(k workerKey) {
	if m != nil {
		m.Failures.WithLabelValues(k.url, k.branch).Inc()
	}
}

func (m *Metrics) delivered(changeAge, commitAge float64) {
	if m != nil {
		// Commit first: a reader that saw change-to-push move finds commit-to-push moved too.
		m.CommitToPush.Observe(commitAge)
		m.ChangeToPush.Observe(changeAge)
	}
}

// builtCommit records a commit's build time and, for the first build of a window (replays
// after a conflict are later builds), the age of the window's oldest change.
func (m *Metrics) builtCommit(took, changeAge time.Duration, first bool) {
	if m != nil {
		m.CommitBuild.Observe(took.Seconds())
		if first {
			m.ChangeToCommit.Observe(changeAge.Seconds())
		}
	}
}

func (m *Metrics) repaired() {
	if m != nil {
		m.Repairs.Inc()
	}
}
