package batch

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ErrTargetNotRegistered means the writer does not know the request's GitTarget yet (the
// leader just started, or the target is not Ready); the caller retries.
var ErrTargetNotRegistered = errors.New("the GitTarget is not registered with the writer yet")

// ErrRecovering wraps ErrTargetNotRegistered for a request created before this writer
// started leading, which started too recently to have registered the GitTarget and looked
// on its branch for a commit an earlier leader pushed with the message (lookBack): the
// caller waits rather than ending the request on its timeout, for up to two Git timeouts
// after the start.
var ErrRecovering = fmt.Errorf("%w, and the writer has not looked for an earlier leader's commit yet", ErrTargetNotRegistered)

// Request hands a CommitRequest to the writer, once: asking again for the same key and UID
// returns what is known so far (Done false while waiting or committing). A request of the
// same name with another UID is a new object: the old one was deleted, and is forgotten.
func (m *Manager) Request(r CommitRequest) (RequestOutcome, error) {
	m.mu.Lock()
	st, ok := m.requests[r.Key]
	if ok && st.req.UID == r.UID {
		if st.unplaced && !st.outcome.Done && st.outcome.Reason != ReasonRetrying && st.outcome.Reason != ReasonTargetStalled &&
			!time.Now().Before(st.req.Deadline) {
			// In no queue since its target moved, and the target's registration on its new
			// repository or branch failed: no queue can time it out. One whose change had
			// arrived (Retrying, TargetStalled) is past its timeout's reach, and waits.
			st.outcome = RequestOutcome{Done: true, Reason: ReasonTimedOut, Message: fmt.Sprintf(
				"GitTarget %s moved to another repository or branch and could not write there within spec.timeout "+
					"(see its Ready condition), so the message was not used", r.Target)}
		}
		out := st.outcome
		m.mu.Unlock()
		return out, nil
	}
	gone := m.forget(r.Key)
	w := m.workers[m.targets[r.Target]]
	if _, ok := m.targets[r.Target]; !ok || w == nil {
		recovering := m.recovering(r.Created, time.Now())
		m.mu.Unlock()
		gone()
		if recovering {
			return RequestOutcome{}, ErrRecovering
		}
		return RequestOutcome{}, ErrTargetNotRegistered
	}
	st = &requestState{req: r, handedTo: w}
	since := m.leadingSince(time.Now())
	st.req.lookBack = !r.Created.IsZero() && r.Created.Before(since)
	st.req.beforeStart = st.req.lookBack
	if st.req.lookBack {
		st.req.lookBackUntil = since.Add(2 * m.opts.gitTimeout())
		st.req.Claimed = m.claimedBesides(r)
	}
	m.requests[r.Key] = st
	m.mu.Unlock()
	gone()
	return m.handedOver(st, w, w.request(&st.req))
}

// handedOver says what Request's hand-over of st to w's queue came to (handed: w had a
// queue for its target), the Manager's lock taken again: the hand-over runs without it, and
// the target may have moved or stopped meanwhile. A request settled meanwhile (its target
// suspended or removed: TargetRemoved) keeps that outcome, and is taken back out of a queue
// it reached, which a target registered again on w has, so its message is not used after
// all. One marked to follow its moving target, or already handed to its new worker
// (rehomed), is tracked there. One that nothing holds waits for its target's registration.
func (m *Manager) handedOver(st *requestState, w *worker, handed bool) (RequestOutcome, error) {
	m.mu.Lock()
	out, moved := st.outcome, st.rehome || st.handedTo != w
	if !out.Done && !handed && !moved && m.requests[st.req.Key] == st {
		delete(m.requests, st.req.Key)
	}
	m.mu.Unlock()
	switch {
	case out.Done:
		if handed && out.SHA == "" {
			w.withdraw(&st.req)
		}
		return out, nil
	case handed || moved:
		return RequestOutcome{}, nil
	}
	return RequestOutcome{}, ErrTargetNotRegistered
}

// claimedBesides is what r's lookBack counts as claimed: the commits its controller saw
// other requests report (r.Claimed), and those this writer answered other requests with,
// whose status may not be written yet, of r's target and requester; and which of those
// requests still wait. By request, so that one known to both counts once, as this
// writer knows it; with the error when the controller could not list them (what this
// writer knows is still given). The function it returns takes m.mu: call that without.
func (m *Manager) claimedBesides(r CommitRequest) func() (map[types.NamespacedName]Claim, error) {
	reported := r.Claimed
	return func() (map[types.NamespacedName]Claim, error) {
		claimed := map[types.NamespacedName]Claim{}
		var unlisted error
		if reported != nil {
			var listed map[types.NamespacedName]Claim
			listed, unlisted = reported()
			maps.Copy(claimed, listed)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		for key, st := range m.requests {
			switch {
			case key == r.Key || !sameRequester(&st.req, &r):
			case st.outcome.SHA != "":
				claimed[key] = Claim{SHA: st.outcome.SHA, Message: st.req.Message}
			case !st.outcome.Done:
				claimed[key] = Claim{Message: st.req.Message, Created: st.req.Created}
			default:
				delete(claimed, key) // settled without a commit
			}
		}
		return claimed, unlisted
	}
}

// sameRequester reports whether two requests are of one requester on one target: only
// such a request's window may have carried the other's message.
func sameRequester(a, b *CommitRequest) bool {
	return a.Target == b.Target && a.Author == b.Author
}

// recovering reports whether a request created at created, before this writer started
// leading, may still be found committed by an earlier leader once its target registers:
// the writer started less than two Git timeouts before now. Callers hold m.mu.
func (m *Manager) recovering(created, now time.Time) bool {
	since := m.leadingSince(now)
	return !created.IsZero() && created.Before(since) && now.Before(since.Add(2*m.opts.gitTimeout()))
}

// leadingSince is when this writer started leading (Start), or now before Start: a
// request handed over before then was made before this replica led, as far as it can
// tell, and a standby's process (NewManager) may have started long before. Callers hold
// m.mu.
func (m *Manager) leadingSince(now time.Time) time.Time {
	if m.started.IsZero() {
		return now
	}
	return m.started
}

// Forget drops a CommitRequest whose object is gone, wherever it waits.
func (m *Manager) Forget(key types.NamespacedName) {
	m.mu.Lock()
	withdraw := m.forget(key)
	m.mu.Unlock()
	withdraw()
}

// forget drops the request of key from the Manager and returns what takes it out of its
// queue, to call once m.mu is released (the worker's locks come after it). Callers hold m.mu.
func (m *Manager) forget(key types.NamespacedName) (withdraw func()) {
	st, ok := m.requests[key]
	if !ok {
		return func() {}
	}
	delete(m.requests, key)
	w := st.handedTo
	return func() {
		if w != nil {
			w.withdraw(&st.req)
		}
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
