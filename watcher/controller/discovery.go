package controller

import (
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
)

// Discovery is the API server's discovery as the rule reconcilers read it, shared by both.
// A CRD change requeues every rule, and a rule whose resource is still listing, or cannot
// be listed, looks again every 15 s or every minute: read afresh each time, discovery (the
// whole API's resource lists, megabytes on a large cluster) would cost one read per rule.
// One answer serves every reconcile for discoveryMaxAge, unless a CRD changed since it
// was read, or it was read before discovery had time to catch up with the last change
// (needsRefresh).
type Discovery struct {
	cache discovery.CachedDiscoveryInterface
	crds  crdClock // when CRDs last changed (crdEvents)

	mu   sync.Mutex
	read time.Time // when the cache was last emptied: its answer is no older
}

// NewDiscovery reads dc through a cache the rule reconcilers share.
func NewDiscovery(dc discovery.DiscoveryInterface) *Discovery {
	return &Discovery{cache: memory.NewMemCacheClient(dc)}
}

// discoveryMaxAge is how long one discovery answer serves the rule reconcilers, when no
// CRD changed meanwhile. Changes that do not come with a CRD event (an aggregated API
// that became available or went away) are seen this much later at most.
const discoveryMaxAge = 10 * time.Second

// preferred lists the server's preferred resources; partial discovery failures (an
// aggregated API down) still return what was found, with the group-versions that failed.
func (d *Discovery) preferred(now time.Time) ([]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	d.mu.Lock()
	if needsRefresh(d.read, d.crds.at(), now) {
		d.cache.Invalidate()
		d.read = now
	}
	d.mu.Unlock()
	lists, err := d.cache.ServerPreferredResources()
	var partial *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &partial) {
		return lists, partial.Groups, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("discovering API resources: %w", err)
	}
	return lists, nil, nil
}

// needsRefresh says whether discovery read at read (zero: never) must be read again at now,
// with the last CRD change at changed (zero: none seen): when it is discoveryMaxAge old,
// when a CRD changed since, and once more when discoveryLag has passed since that change,
// since the API server may publish a changed CRD's resources only then.
func needsRefresh(read, changed, now time.Time) bool {
	switch {
	case read.IsZero(), now.Sub(read) >= discoveryMaxAge:
		return true
	case changed.IsZero():
		return false
	case read.Before(changed):
		return true
	default:
		settled := changed.Add(discoveryLag)
		return read.Before(settled) && !now.Before(settled)
	}
}
