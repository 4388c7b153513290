package attribution

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Router takes the webhook's records: into the Book when this replica leads (the watcher
// and writer run there), else to the leader through the Forwarder. A record that cannot be
// forwarded is kept locally (this replica may lead next) and its change will be committed
// under the committer identity: a lost record costs attribution, never a write.
type Router struct {
	// Book holds this replica's records; the watcher joins from it while this replica leads.
	Book *Book
	// Forwarder is nil when no address to reach the leader is configured.
	Forwarder *Forwarder
	// Elected is closed once this replica leads (at once without leader election).
	Elected <-chan struct{}
	// Metrics counts forwards; nil counts nothing.
	Metrics *Metrics
	Log     logr.Logger
}

// Record routes one record.
func (r *Router) Record(ctx context.Context, k Key, a Author) {
	if r.leading() || r.Forwarder == nil {
		r.Book.Record(k, a)
		return
	}
	err := r.Forwarder.Forward(ctx, k, a)
	r.Metrics.forwarded(err == nil)
	if err != nil {
		r.Log.V(1).Info("could not forward an attribution record to the leader; its change will be committed under the committer identity", "error", err.Error())
		r.Book.Record(k, a)
	}
}

func (r *Router) leading() bool { return replica.Closed(r.Elected) }

// Identity is a leader-election identity that tells the other replicas where this one takes
// forwarded records: "<unique>@<host:port>". Without an address it is just unique.
func Identity(unique, address string) string {
	if address == "" {
		return unique
	}
	return unique + "@" + address
}

// addressOf is the address part of an Identity, "" when it has none.
func addressOf(identity string) string {
	if i := strings.LastIndexByte(identity, '@'); i >= 0 {
		return identity[i+1:]
	}
	return ""
}

// LeaseLeader reads the leader's address from the leader-election Lease, caching it briefly
// so a burst of admissions costs one read.
type LeaseLeader struct {
	// Reader reads the Lease (uncached: the leader changes under a cache's feet).
	Reader client.Reader
	// Lease is the leader-election Lease.
	Lease types.NamespacedName
	// TTL is how long an address is trusted (default 5 s); Forget drops it sooner.
	TTL time.Duration

	mu   sync.Mutex
	addr string
	at   time.Time
}

// Forget drops the cached address, so the next forward reads the Lease again.
func (l *LeaseLeader) Forget() {
	l.mu.Lock()
	l.at = time.Time{}
	l.mu.Unlock()
}

// Address returns the current leader's host:port ("" when unknown).
func (l *LeaseLeader) Address(ctx context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ttl := l.TTL
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	if !l.at.IsZero() && time.Since(l.at) < ttl {
		return l.addr, nil
	}
	// Bounded: admissions on this replica wait behind this read (one read serves them all).
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var lease coordinationv1.Lease
	if err := l.Reader.Get(ctx, l.Lease, &lease); err != nil {
		return "", fmt.Errorf("reading Lease %s: %w", l.Lease, err)
	}
	l.addr, l.at = "", time.Now()
	if lease.Spec.HolderIdentity != nil {
		l.addr = addressOf(*lease.Spec.HolderIdentity)
	}
	return l.addr, nil
}
