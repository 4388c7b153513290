package attribution

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
)

// RecordsPath is where the leader accepts admission records from the other replicas: the
// webhook runs on every replica, the writer only on the leader, so a record made elsewhere
// must reach the leader before the change it describes is stored and watched.
const RecordsPath = "/attribution/records"

// maxRecordBytes bounds one forwarded record; a username, UID and groups fit many times.
const maxRecordBytes = 64 << 10

// wireRecord is the wire form of one forwarded record.
type wireRecord struct {
	Key    Key    `json:"key"`
	Author Author `json:"author"`
}

// Receiver is the leader's end: it accepts records only from a client presenting the
// serving key pair (mutual TLS, compared by public key, so neither another workload nor a
// certificate from the same cluster-wide CA can assert an author).
type Receiver struct {
	// Book is where accepted records go; the watcher joins from it.
	Book *Book
	// Own is this replica's serving key pair, which a client must also present.
	Own replica.KeyPair
	// Elected is closed once this replica leads; before, records are refused (503), so a
	// replica that merely sits at a stale leader address never swallows them.
	Elected <-chan struct{}
	// Resigned is closed once this replica's watcher and writer have stopped (a shutdown
	// stops them before the webhook server, and releases the Lease last): from then on
	// records are refused (503) too, so a follower keeps them in its own book, which the
	// watcher joins from should it lead next, rather than hand them to one that will never
	// join them. Nil: never.
	Resigned <-chan struct{}
	Log      logr.Logger
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.Resigned != nil && replica.Closed(r.Resigned) {
		http.Error(w, "no longer the leader", http.StatusServiceUnavailable)
		return
	}
	if !replica.Admit(w, req, r.Own, r.Elected, r.Log, "an attribution record") {
		return
	}
	var rec wireRecord
	if err := json.NewDecoder(io.LimitReader(req.Body, maxRecordBytes)).Decode(&rec); err != nil {
		http.Error(w, "malformed record", http.StatusBadRequest)
		return
	}
	r.Book.Record(rec.Key, rec.Author)
	w.WriteHeader(http.StatusNoContent)
}

// Forwarder is a non-leader replica's end: it posts a record to the leader and waits for it
// to be taken, so the record is there before the API server stores the change.
type Forwarder struct {
	Leader *replica.Leader
}

// Forward sends one record to the leader.
func (f *Forwarder) Forward(ctx context.Context, k Key, a Author) error {
	if err := f.Leader.Post(ctx, RecordsPath, wireRecord{Key: k, Author: a}, nil); err != nil {
		return fmt.Errorf("forwarding an attribution record: %w", err)
	}
	return nil
}
