package attribution

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"github.com/gitops-reverser/gitops-reverser/test/testcerts"
)

// leader serves a Receiver as a replica's webhook server does.
func leader(t *testing.T, own replica.KeyPair) (*Book, string) {
	t.Helper()
	book := NewBook(0, 0)
	cert, err := own.Current()
	require.NoError(t, err)
	srv := testcerts.ServeReplica(&Receiver{Book: book, Own: own, Log: logr.Discard()}, cert)
	t.Cleanup(srv.Close)
	return book, strings.TrimPrefix(srv.URL, "https://")
}

func TestForwarding(t *testing.T) {
	replicas := testcerts.ReplicaKeyPair(t)
	k := UpdateKey("u1", "5", Digest{1, 2, 3})
	alice := Author{Username: "alice"}

	t.Run("the leader takes a record from a replica holding the serving key pair", func(t *testing.T) {
		book, addr := leader(t, replicas)
		f := &Forwarder{Leader: &replica.Leader{Own: replicas, Address: func(context.Context) (string, error) { return addr, nil }}}
		require.NoError(t, f.Forward(context.Background(), k, alice))
		got, ok := book.Join(k)
		require.True(t, ok)
		assert.Equal(t, alice, who(got))
	})
	t.Run("a replica does not send records to a server without the serving key", func(t *testing.T) {
		book, addr := leader(t, testcerts.ReplicaKeyPair(t))
		f := &Forwarder{Leader: &replica.Leader{Own: replicas, Address: func(context.Context) (string, error) { return addr, nil }}}
		err := f.Forward(context.Background(), k, alice)
		assert.ErrorContains(t, err, "does not hold the webhook serving key")
		assert.Equal(t, 0, book.Len())
	})
	t.Run("the leader refuses a client with another key pair", func(t *testing.T) {
		book, addr := leader(t, replicas)
		other := testcerts.ReplicaKeyPair(t)
		cert, _ := other()
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{*cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // the attacker's client
		resp, err := c.Post("https://"+addr+RecordsPath, "application/json", bytes.NewBufferString(`{"key":{"op":"CREATE","uid":"u1"},"author":{"username":"mallory"}}`))
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Equal(t, 0, book.Len())
	})
	t.Run("the leader refuses a client without a certificate", func(t *testing.T) {
		book, addr := leader(t, replicas)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // test client
		resp, err := c.Post("https://"+addr+RecordsPath, "application/json", bytes.NewBufferString(`{}`))
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Equal(t, 0, book.Len())
	})
	t.Run("a replica that does not lead refuses records, so a stale leader address never swallows them", func(t *testing.T) {
		book := NewBook(0, 0)
		cert, err := replicas()
		require.NoError(t, err)
		srv := testcerts.ServeReplica(&Receiver{Book: book, Own: replicas, Elected: make(chan struct{}), Log: logr.Discard()}, cert)
		t.Cleanup(srv.Close)
		forgot := false
		f := &Forwarder{Leader: &replica.Leader{Own: replicas, Address: func(context.Context) (string, error) { return strings.TrimPrefix(srv.URL, "https://"), nil },
			Forget: func() { forgot = true }}}
		assert.ErrorContains(t, f.Forward(context.Background(), k, alice), "503")
		assert.True(t, forgot, "the cached leader address is dropped after a failed forward")
		assert.Equal(t, 0, book.Len())
	})
	t.Run("a leader whose watcher has stopped refuses records, so the follower keeps them", func(t *testing.T) {
		book := NewBook(0, 0)
		cert, err := replicas()
		require.NoError(t, err)
		elected, resigned := make(chan struct{}), make(chan struct{})
		close(elected)
		close(resigned)
		srv := testcerts.ServeReplica(&Receiver{Book: book, Own: replicas, Elected: elected, Resigned: resigned, Log: logr.Discard()}, cert)
		t.Cleanup(srv.Close)
		local := NewBook(0, 0)
		r := &Router{Book: local, Elected: make(chan struct{}), Log: logr.Discard(),
			Forwarder: &Forwarder{Leader: &replica.Leader{Own: replicas, Address: func(context.Context) (string, error) {
				return strings.TrimPrefix(srv.URL, "https://"), nil
			}, Forget: func() {}}}}
		r.Record(context.Background(), k, alice)
		assert.Equal(t, 0, book.Len(), "not taken by the leader that stops")
		_, ok := local.Join(k)
		assert.True(t, ok, "kept by the follower")
	})
	t.Run("a record that cannot be forwarded is kept locally and counted", func(t *testing.T) {
		book := NewBook(0, 0)
		r := &Router{Book: book, Elected: make(chan struct{}), Log: logr.Discard(),
			Forwarder: &Forwarder{Leader: &replica.Leader{Own: replicas, Address: func(context.Context) (string, error) { return "", nil }}}}
		r.Record(context.Background(), k, alice)
		_, ok := book.Join(k)
		assert.True(t, ok)
	})
	t.Run("the leader records into its own book", func(t *testing.T) {
		book := NewBook(0, 0)
		elected := make(chan struct{})
		close(elected)
		r := &Router{Book: book, Elected: elected, Forwarder: &Forwarder{Leader: &replica.Leader{Address: func(context.Context) (string, error) {
			t.Fatal("the leader must not forward")
			return "", nil
		}}}}
		r.Record(context.Background(), k, alice)
		assert.Equal(t, 1, book.Len())
	})
}

func TestAddressOf(t *testing.T) {
	assert.Equal(t, "10.0.0.7:9443", addressOf(Identity("pod-a_1234", "10.0.0.7:9443")))
	assert.Equal(t, "[fd00::7]:9443", addressOf(Identity("pod-a_1234", "[fd00::7]:9443")))
	assert.Equal(t, "", addressOf(Identity("pod-a_1234", "")), "an identity without an address forwards nowhere")
}
