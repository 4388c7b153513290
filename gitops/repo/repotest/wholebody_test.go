package repotest

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestABodyCutShortNeverReachesTheBackend(t *testing.T) {
	var reached atomic.Bool
	srv := httptest.NewServer(wholeBody(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Store(true) })))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /remote.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"))
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite()) // the client goes away mid-push
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.False(t, reached.Load(), "git http-backend would read on at end of file for ever")
}

func TestAWholeBodyReachesTheBackend(t *testing.T) {
	var got int64
	srv := httptest.NewServer(wholeBody(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.ContentLength })))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/x-git-receive-pack-request", bufio.NewReader(strings.NewReader("0123456789")))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int64(10), got, "a chunked body is handed on with its length")
}
