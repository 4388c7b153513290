package controller

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"

	"github.com/gitops-reverser/gitops-reverser/watcher"
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

// preferredFor is preferred for a rule whose claims are registered: an answer from the cache
// that no longer lists the resource of one of them (nor says its API fails) is read again
// before the rule drops it, so a cached answer never drops more than a fresh read would (an
// APIService recreated during an upgrade is briefly missing from discovery).
func (d *Discovery) preferredFor(now time.Time, registered []watcher.Claim) ([]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	lists, failed, err := d.preferred(now, false)
	if err != nil || !dropsAny(lists, failed, registered) {
		return lists, failed, err
	}
	return d.preferred(now, true)
}

// dropsAny says whether a discovery answer (lists, failed) neither lists the resource of
// one of registered at its group-version nor says that group-version failed. Pure.
func dropsAny(lists []*metav1.APIResourceList, failed map[schema.GroupVersion]error, registered []watcher.Claim) bool {
	for _, c := range registered {
		gvr := c.Resource.GVR
		if _, down := failed[gvr.GroupVersion()]; down {
			continue
		}
		listed := slices.ContainsFunc(lists, func(l *metav1.APIResourceList) bool {
			return l.GroupVersion == gvr.GroupVersion().String() &&
				slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource })
		})
		if !listed {
			return true
		}
	}
	return false
}

// preferred lists the server's preferred resources; partial discovery failures (an
// aggregated API down) still return what was found, with the group-versions that failed.
// fresh reads discovery again whatever the cache's age.
func (d *Discovery) preferred(now time.Time, fresh bool) ([]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	d.mu.Lock()
	if fresh || needsRefresh(d.read, d.crds.at(), now) {
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
