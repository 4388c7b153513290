package webhook

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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/test/testcerts"
)

// locatorFunc is a Locator from a function: the writer's answers, as the test sets them.
type locatorFunc func(types.NamespacedName, schema.GroupVersionResource, string, string, string) batch.Location

func (f locatorFunc) Locate(t types.NamespacedName, gvr schema.GroupVersionResource, kind, ns, name string) batch.Location {
	return f(t, gvr, kind, ns, name)
}

// knowsNothing is a follower's writer, which registers no target.
var knowsNothing = locatorFunc(func(types.NamespacedName, schema.GroupVersionResource, string, string, string) batch.Location {
	return batch.Location{}
})

// serveLocate serves a LocateServer as a replica's webhook server does; it returns
// host:port.
func serveLocate(t *testing.T, s *LocateServer) string {
	t.Helper()
	cert, err := s.Own.Current()
	require.NoError(t, err)
	srv := testcerts.ServeReplica(s, cert)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://")
}

func TestAFollowerJudgesWithTheLeadersFolderIndex(t *testing.T) {
	replicas := testcerts.ReplicaKeyPair(t)
	live := types.NamespacedName{Namespace: "team-a", Name: "live"}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	held := batch.Location{Path: "live/team-a/configmaps/app.yaml", Problem: "ConfigMap team-a/other's document is in that file",
		Encrypted: true, Absent: true, RemovalProblem: "live/team-a/configmaps/app.yaml holds 2 objects"} // every field crosses the wire
	var asked []string
	writer := locatorFunc(func(target types.NamespacedName, gvr schema.GroupVersionResource, kind, ns, name string) batch.Location {
		asked = append(asked, strings.Join([]string{target.String(), gvr.String(), kind, ns, name}, "|"))
		return held
	})
	notLeading := make(chan struct{})
	follower := func(addr string, forgot *bool) *LeaderLocator {
		return &LeaderLocator{Local: knowsNothing, Elected: notLeading, Log: logr.Discard(), Leader: &replica.Leader{Own: replicas,
			Address: func(context.Context) (string, error) { return addr, nil }, Forget: func() { *forgot = true }}}
	}

	t.Run("a follower gets the leader's answer", func(t *testing.T) {
		asked = nil
		addr := serveLocate(t, &LocateServer{Locator: writer, Own: replicas, Log: logr.Discard()})
		var forgot bool
		assert.Equal(t, held, follower(addr, &forgot).Locate(live, cms, "ConfigMap", "team-a", "app"))
		assert.Equal(t, []string{"team-a/live|/v1, Resource=configmaps|ConfigMap|team-a|app"}, asked, "the question arrives whole")
		assert.False(t, forgot)
	})
	t.Run("the leader answers from its own writer", func(t *testing.T) {
		l := &LeaderLocator{Local: writer, Elected: nil, Log: logr.Discard(), Leader: &replica.Leader{Own: replicas,
			Address: func(context.Context) (string, error) { t.Fatal("a leader does not ask itself"); return "", nil }}}
		assert.Equal(t, held, l.Locate(live, cms, "ConfigMap", "team-a", "app"))
	})
	t.Run("a follower that cannot reach the leader judges as before, with the canonical path", func(t *testing.T) {
		var forgot bool
		assert.Equal(t, batch.Location{}, follower("127.0.0.1:1", &forgot).Locate(live, cms, "ConfigMap", "team-a", "app"))
		assert.True(t, forgot, "the cached leader address is dropped")
	})
	t.Run("after a failed question a follower judges alone for a while, not failing once per target", func(t *testing.T) {
		asked = nil
		addr := "127.0.0.1:1"
		var forgot bool
		l := &LeaderLocator{Local: knowsNothing, Elected: notLeading, Log: logr.Discard(), Leader: &replica.Leader{Own: replicas,
			Address: func(context.Context) (string, error) { return addr, nil }, Forget: func() { forgot = true }}}
		require.Equal(t, batch.Location{}, l.Locate(live, cms, "ConfigMap", "team-a", "app"))
		require.True(t, forgot)
		addr = serveLocate(t, &LocateServer{Locator: writer, Own: replicas, Log: logr.Discard()}) // the new leader

		assert.Equal(t, batch.Location{}, l.Locate(live, cms, "ConfigMap", "team-a", "app"))
		assert.Empty(t, asked, "not asked within quietAfterFailure")
	})
	t.Run("a replica at a stale leader address does not answer from its empty writer", func(t *testing.T) {
		addr := serveLocate(t, &LocateServer{Locator: writer, Own: replicas, Elected: make(chan struct{}), Log: logr.Discard()})
		var forgot bool
		assert.Equal(t, batch.Location{}, follower(addr, &forgot).Locate(live, cms, "ConfigMap", "team-a", "app"))
		assert.True(t, forgot)
	})
	t.Run("a follower does not take answers from a server without the serving key", func(t *testing.T) {
		addr := serveLocate(t, &LocateServer{Locator: writer, Own: testcerts.ReplicaKeyPair(t), Log: logr.Discard()})
		var forgot bool
		assert.Equal(t, batch.Location{}, follower(addr, &forgot).Locate(live, cms, "ConfigMap", "team-a", "app"))
	})
	t.Run("the leader answers no client without the serving key pair", func(t *testing.T) {
		addr := serveLocate(t, &LocateServer{Locator: writer, Own: replicas, Log: logr.Discard()})
		other, err := testcerts.ReplicaKeyPair(t)()
		require.NoError(t, err)
		for name, cfg := range map[string]*tls.Config{
			"another key pair": {Certificates: []tls.Certificate{*other}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // the prober's client
			"no certificate":   {InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},                                          //nolint:gosec // the prober's client
		} {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			resp, err := c.Post("https://"+addr+LocatePath, "application/json", bytes.NewBufferString(`{"target":{"Namespace":"team-a","Name":"live"}}`))
			require.NoError(t, err, name)
			_ = resp.Body.Close()
			assert.Contains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, resp.StatusCode, name)
		}
	})
}
