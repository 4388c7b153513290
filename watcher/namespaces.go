package watcher

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// DeletedNamespaces remembers the labels of namespaces deleted in the last while. The
// deletes of their objects can be handled after the namespace is gone (each informer is its
// own watch stream; a re-list's tombstones come later still), and must meet the
// namespaceSelectors the objects met: without the labels a delete would be dropped, or
// reach a target whose selector never took the namespace in.
type DeletedNamespaces struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	labels map[string]deletedNamespace
}

type deletedNamespace struct {
	labels labels.Set
	at     time.Time
}

// NewDeletedNamespaces keeps each namespace's labels for ttl after its deletion.
func NewDeletedNamespaces(ttl time.Duration) *DeletedNamespaces {
	return &DeletedNamespaces{ttl: ttl, now: time.Now, labels: map[string]deletedNamespace{}}
}

// Remember records the labels of a namespace just deleted, and forgets those kept too long.
func (d *DeletedNamespaces) Remember(name string, l labels.Set) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for n, e := range d.labels {
		if now.Sub(e.at) > d.ttl {
			delete(d.labels, n)
		}
	}
	d.labels[name] = deletedNamespace{labels: labels.Merge(nil, l), at: now}
}

// Forget drops what is remembered of a namespace: one of that name exists again.
func (d *DeletedNamespaces) Forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.labels, name)
}

// Labels returns the labels a namespace had when it was deleted, if that was recent.
func (d *DeletedNamespaces) Labels(name string) (labels.Set, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.labels[name]
	if !ok || d.now().Sub(e.at) > d.ttl {
		return nil, false
	}
	return e.labels, true
}
