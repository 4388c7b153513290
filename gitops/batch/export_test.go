package batch

import "k8s.io/apimachinery/pkg/types"

// Settled reports, for the package's external tests, whether target key has no change
// pending and no window being committed: what the writer was given has landed or failed.
func (m *Manager) Settled(key types.NamespacedName) bool {
	w := m.workerOf(key)
	if w == nil {
		return true
	}
	w.qmu.Lock()
	defer w.qmu.Unlock()
	q := w.queues[key]
	return q == nil || (q.pending() == 0 && len(q.flushing) == 0)
}

// RecoveredDeletions counts the deletions an earlier process left that no snapshot took yet.
func (m *Manager) RecoveredDeletions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, keys := range m.recovered {
		n += len(keys)
	}
	return n
}

// Leading reports, for the package's external tests, whether Start has begun: the writer
// counts what came before from then (leadingSince).
func (m *Manager) Leading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.started.IsZero()
}
