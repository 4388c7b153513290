package batch

import (
	"errors"

	"k8s.io/apimachinery/pkg/types"
)

// ErrTargetNotRegistered means the writer does not know the request's GitTarget yet (the
// leader just started, or the target is not Ready); the caller retries.
var ErrTargetNotRegistered = errors.New("the GitTarget is not registered with the writer yet")

// Request hands a CommitRequest to the writer, once: asking again for the same key returns
// what is known so far (Done false while waiting or committing).
func (m *Manager) Request(r CommitRequest) (RequestOutcome, error) {
	m.mu.Lock()
	if st, ok := m.requests[r.Key]; ok {
		out := st.outcome
		m.mu.Unlock()
		return out, nil
	}
	w := m.workers[m.targets[r.Target]]
	if _, ok := m.targets[r.Target]; !ok || w == nil {
		m.mu.Unlock()
		return RequestOutcome{}, ErrTargetNotRegistered
	}
	st := &requestState{req: r}
	m.requests[r.Key] = st
	m.mu.Unlock()
	if !w.request(&st.req) {
		m.mu.Lock()
		delete(m.requests, r.Key)
		m.mu.Unlock()
		return RequestOutcome{}, ErrTargetNotRegistered
	}
	return RequestOutcome{}, nil
}

// Forget drops a CommitRequest whose object is gone, wherever it waits.
func (m *Manager) Forget(key types.NamespacedName) {
	m.mu.Lock()
	st, ok := m.requests[key]
	delete(m.requests, key)
	var w *worker
	if ok {
		w = m.workers[m.targets[st.req.Target]]
	}
	m.mu.Unlock()
	if w != nil {
		w.withdraw(st.req.Target, key)
	}
}

// settle records a request's outcome and tells its controller. The first final outcome
// stands: a commit pushed while its target was being removed is not reported as removed.
func (m *Manager) settle(r *CommitRequest, out RequestOutcome) {
	m.mu.Lock()
	st, ok := m.requests[r.Key]
	// An answer for a deleted request (still in a window being committed) is not for a new
	// one of the same name; an unchanged outcome is news to nobody.
	if ok && (st.outcome.Done || &st.req != r || st.outcome == out) {
		ok = false
	}
	if ok {
		st.outcome = out
	}
	m.mu.Unlock()
	if ok {
		m.opts.OnRequest(r.Key)
	}
}
