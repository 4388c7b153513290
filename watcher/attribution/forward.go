package attribution

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
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

// OwnCertificate returns the replica's current webhook serving certificate. Every replica
// serves the same key pair (one Secret), so holding it is what proves a peer is a replica.
type OwnCertificate func() (*tls.Certificate, error)

// samePublicKey reports whether peer carries the public key of own.
func samePublicKey(own *tls.Certificate, peer *x509.Certificate) (bool, error) {
	if own == nil || len(own.Certificate) == 0 || peer == nil {
		return false, nil
	}
	leaf := own.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(own.Certificate[0]); err != nil {
			return false, fmt.Errorf("parsing the serving certificate: %w", err)
		}
	}
	return bytes.Equal(leaf.RawSubjectPublicKeyInfo, peer.RawSubjectPublicKeyInfo), nil
}

// Receiver is the leader's end: it accepts records only from a client presenting the
// serving key pair (mutual TLS, compared by public key, so neither another workload nor a
// certificate from the same cluster-wide CA can assert an author).
type Receiver struct {
	// Book is where accepted records go; the watcher joins from it.
	Book *Book
	// Own is this replica's serving key pair, which a client must also present.
	Own OwnCertificate
	// Elected is closed once this replica leads; before, records are refused (503), so a
	// replica that merely sits at a stale leader address never swallows them.
	Elected <-chan struct{}
	Log     logr.Logger
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if !closed(r.Elected) {
		http.Error(w, "not the leader", http.StatusServiceUnavailable)
		return
	}
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		http.Error(w, "a client certificate is required", http.StatusUnauthorized)
		return
	}
	own, err := r.Own()
	if err != nil {
		http.Error(w, "serving certificate unavailable", http.StatusServiceUnavailable)
		return
	}
	if ok, err := samePublicKey(own, req.TLS.PeerCertificates[0]); err != nil || !ok {
		r.Log.Info("refused an attribution record from a client without the serving key pair", "remote", req.RemoteAddr)
		http.Error(w, "not a replica", http.StatusForbidden)
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
	// Own is this replica's serving key pair, presented to the leader and expected from it.
	Own OwnCertificate
	// Leader returns the leader's host:port, or "" when it is unknown or this replica.
	Leader func(ctx context.Context) (string, error)
	// Forget drops a cached leader address after a failed forward; nil does nothing.
	Forget func()
	// Timeout bounds one forward (default 500 ms).
	Timeout time.Duration

	once   sync.Once
	client *http.Client
}

// ErrNoLeader means no leader address is known: the record cannot be forwarded.
var ErrNoLeader = errors.New("no leader address is known")

// Forward sends one record to the leader.
func (f *Forwarder) Forward(ctx context.Context, k Key, a Author) error {
	addr, err := f.Leader(ctx)
	if err != nil {
		return fmt.Errorf("finding the leader: %w", err)
	}
	if addr == "" {
		return ErrNoLeader
	}
	body, err := json.Marshal(wireRecord{Key: k, Author: a})
	if err != nil {
		return fmt.Errorf("encoding an attribution record: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+RecordsPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("forwarding an attribution record to the leader at %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.httpClient().Do(req)
	if err != nil {
		f.forget()
		return fmt.Errorf("forwarding an attribution record to the leader at %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusNoContent {
		f.forget()
		return fmt.Errorf("forwarding an attribution record to the leader at %s: %s", addr, resp.Status)
	}
	return nil
}

func (f *Forwarder) forget() {
	if f.Forget != nil {
		f.Forget()
	}
}

// closed reports whether ch is closed; a nil channel counts as closed (no election).
func closed(ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (f *Forwarder) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return 500 * time.Millisecond
}

// httpClient presents the serving key pair and accepts only a server presenting it too:
// the leader is reached by address, which the certificate does not name, so the check is
// on the key both replicas share rather than on names.
func (f *Forwarder) httpClient() *http.Client {
	f.once.Do(func() {
		cfg := &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return f.Own()
			},
			// Names are not checked (the leader is dialled by address); VerifyConnection
			// checks the key instead, which is stronger.
			InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection below
			VerifyConnection: func(cs tls.ConnectionState) error {
				own, err := f.Own()
				if err != nil {
					return err
				}
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the leader presented no certificate")
				}
				ok, err := samePublicKey(own, cs.PeerCertificates[0])
				if err != nil {
					return err
				}
				if !ok {
					return errors.New("the leader does not hold the webhook serving key")
				}
				return nil
			},
		}
		f.client = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}}
	})
	return f.client
}
