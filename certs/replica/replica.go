// Package replica lets the operator's replicas talk to each other over the webhook server:
// every replica serves the same key pair (one Secret), so holding it is what proves a peer
// is a replica, on both ends of a connection. Followers use it to hand the leader what only
// the leader can act on (attribution records) and to ask it what only it knows (where an
// object lands in Git).
package replica

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

// KeyPair is a replica's webhook serving key pair: the one it presents, and the public keys
// it takes from a peer for proof that the peer is a replica.
type KeyPair interface {
	// Current is the key pair presented.
	Current() (*tls.Certificate, error)
	// Accepts reports whether peer carries a key a replica holds.
	Accepts(peer *x509.Certificate) (bool, error)
}

// Loaded is a KeyPair that accepts only the key of the pair the function returns.
type Loaded func() (*tls.Certificate, error)

// Current implements KeyPair.
func (l Loaded) Current() (*tls.Certificate, error) { return l() }

// Accepts implements KeyPair.
func (l Loaded) Accepts(peer *x509.Certificate) (bool, error) {
	own, err := l()
	if err != nil {
		return false, err
	}
	return SamePublicKey(own, peer)
}

// Rotating is the KeyPair of a replica that reads the shared pair through Load, at most
// once per Every (default a second), and also accepts the key it held before a change, for
// Grace after the new certificate's NotBefore (and never longer than Grace after it saw
// the change, however late that was): a webhook server presents a renewed certificate up to
// 10 s after its files change (certwatcher), and a connection made before keeps its
// certificates, so for a while a peer may still present the previous key, which came from
// the same Secret. A replica whose files lag its peers' is not covered: it does not know the
// new key yet.
type Rotating struct {
	Load  func() (*tls.Certificate, error)
	Grace time.Duration
	Every time.Duration

	mu       sync.Mutex
	cur      *tls.Certificate
	read     time.Time
	previous []byte    // the public key before the last change (SubjectPublicKeyInfo, DER)
	until    time.Time // when previous stops being accepted
}

// Current implements KeyPair.
func (r *Rotating) Current() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.currentLocked(time.Now())
}

func (r *Rotating) currentLocked(now time.Time) (*tls.Certificate, error) {
	every := r.Every
	if every <= 0 {
		every = time.Second
	}
	if r.cur != nil && now.Sub(r.read) < every {
		return r.cur, nil
	}
	c, err := r.Load()
	if err != nil {
		return nil, err
	}
	if r.cur != nil {
		if was, is := publicKey(r.cur), publicKey(c); was != nil && !bytes.Equal(was, is) {
			r.previous, r.until = was, now.Add(r.Grace)
			if leaf := leafOf(c); leaf != nil && leaf.NotBefore.Add(r.Grace).Before(r.until) {
				r.until = leaf.NotBefore.Add(r.Grace)
			}
		}
	}
	r.cur, r.read = c, now
	return c, nil
}

// Accepts implements KeyPair: the current key, or the previous one within Grace of the change.
func (r *Rotating) Accepts(peer *x509.Certificate) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	own, err := r.currentLocked(now)
	if err != nil {
		return false, err
	}
	if ok, err := SamePublicKey(own, peer); err != nil || ok {
		return ok, err
	}
	return peer != nil && r.previous != nil && now.Before(r.until) && bytes.Equal(r.previous, peer.RawSubjectPublicKeyInfo), nil
}

// leafOf is c's parsed leaf, nil when it cannot be read.
func leafOf(c *tls.Certificate) *x509.Certificate {
	if c == nil || len(c.Certificate) == 0 {
		return nil
	}
	if c.Leaf != nil {
		return c.Leaf
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// publicKey is the SubjectPublicKeyInfo of c's leaf, nil when it cannot be read.
func publicKey(c *tls.Certificate) []byte {
	if leaf := leafOf(c); leaf != nil {
		return leaf.RawSubjectPublicKeyInfo
	}
	return nil
}

// SamePublicKey reports whether peer carries the public key of own. Keys, not names, are
// compared: a replica is reached by address, which the certificate does not name, and a
// certificate from the same cluster-wide CA must not pass for a replica.
func SamePublicKey(own *tls.Certificate, peer *x509.Certificate) (bool, error) {
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

// Refusal is why a server refuses a request that is not from a replica: the HTTP status to
// answer with, and the reason.
type Refusal struct {
	Status int
	Reason string
}

// Check says whether req comes from a client presenting own's public key (mutual TLS); nil
// when it does.
func Check(req *http.Request, own KeyPair) *Refusal {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return &Refusal{Status: http.StatusUnauthorized, Reason: "a client certificate is required"}
	}
	if _, err := own.Current(); err != nil {
		return &Refusal{Status: http.StatusServiceUnavailable, Reason: "serving certificate unavailable"}
	}
	if ok, err := own.Accepts(req.TLS.PeerCertificates[0]); err != nil || !ok {
		return &Refusal{Status: http.StatusForbidden, Reason: "not a replica"}
	}
	return nil
}

// Client is an HTTP client that presents own's key pair and accepts only a server that
// presents it too. Names are not checked (the leader is dialled by address); the key is,
// which is stronger.
func Client(own KeyPair) *http.Client {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return own.Current()
		},
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the leader presented no certificate")
			}
			ok, err := own.Accepts(cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("the leader does not hold the webhook serving key")
			}
			return nil
		},
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}}
}

// Closed reports whether ch is closed; a nil channel counts as closed (no election). It is
// how a replica tells, from the manager's Elected channel, that it leads.
func Closed(ch <-chan struct{}) bool {
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

// Admit lets through, on the leader, a POST from a replica: it answers any other request
// itself (405; 503 while this replica does not lead, so a replica at a stale leader address
// never takes what only the leader may; 401/403 for a client without the key pair, logged
// naming what was refused) and reports whether the handler goes on.
func Admit(w http.ResponseWriter, req *http.Request, own KeyPair, elected <-chan struct{}, log logr.Logger, what string) bool {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return false
	}
	if !Closed(elected) {
		http.Error(w, "not the leader", http.StatusServiceUnavailable)
		return false
	}
	if refused := Check(req, own); refused != nil {
		// The client's next request dials again and presents the key it holds then: a
		// connection made before a renewal keeps its certificates otherwise.
		w.Header().Set("Connection", "close")
		if refused.Status == http.StatusForbidden {
			log.Info("refused "+what+" from a client without the serving key pair", "remote", req.RemoteAddr)
		}
		http.Error(w, refused.Reason, refused.Status)
		return false
	}
	return true
}

// ErrNoLeader means no leader address is known: nothing can be handed to it.
var ErrNoLeader = errors.New("no leader address is known")

// Leader is a follower's way to the leader's webhook server.
type Leader struct {
	// Own is this replica's serving key pair, presented to the leader and expected from it.
	Own KeyPair
	// Address returns the leader's host:port, or "" when it is unknown or this replica.
	Address func(ctx context.Context) (string, error)
	// Forget drops a cached leader address after a failed post; nil does nothing.
	Forget func()
	// Timeout bounds one post once the leader is found (default 500 ms): the API server waits
	// for the whole admission review only --webhook-timeout-seconds.
	Timeout time.Duration

	once   sync.Once
	client *http.Client
}

// Post sends in, as JSON, to path on the leader and decodes a JSON answer into out (nil: no
// answer wanted). Any answer but a 2xx fails, and a failure forgets the leader's address:
// the next post looks it up again.
func (l *Leader) Post(ctx context.Context, path string, in, out any) error {
	addr, err := l.Address(ctx)
	if err != nil {
		return fmt.Errorf("finding the leader: %w", err)
	}
	if addr == "" {
		return ErrNoLeader
	}
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding for the leader: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("posting to the leader at %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.httpClient().Do(req)
	if err != nil {
		l.forget()
		return fmt.Errorf("posting to the leader at %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		l.forget()
		return fmt.Errorf("posting to the leader at %s: %s", addr, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(out); err != nil {
		return fmt.Errorf("reading the leader's answer: %w", err)
	}
	return nil
}

// maxAnswerBytes bounds an answer read from the leader.
const maxAnswerBytes = 64 << 10

func (l *Leader) forget() {
	if l.Forget != nil {
		l.Forget()
	}
}

func (l *Leader) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return 500 * time.Millisecond
}

func (l *Leader) httpClient() *http.Client {
	l.once.Do(func() { l.client = Client(l.Own) })
	return l.client
}
