package repo_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestAnEndlessErrorBodyFromAGitServerIsReadOnlyInPart(t *testing.T) {
	repo.BoundHTTPErrorBodies() // as main does at start
	const offered = 64 << 20    // what the server would send: as good as endless for go-git, which reads it all
	var written atomic.Int64
	endless := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			chunk := make([]byte, 64<<10)
			for i := range chunk {
				chunk[i] = 'x'
			}
			for written.Load() < offered {
				n, err := w.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return // the client hung up
				}
			}
		})
	}
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(endless))

	err := repo.LsRemote(context.Background(), remote.URL, nil)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 1<<20, "the error quotes only the start of the body")
	assert.Less(t, written.Load(), int64(offered/2), "the client hung up long before the end: socket buffers took the rest")
}

func TestATLSOptionTheBoundedClientCannotTakeIsAnErrorNotAPanic(t *testing.T) {
	repo.BoundHTTPErrorBodies() // as main does at start
	remote := repotest.NewHTTPRemote(t)
	ep, err := transport.NewEndpoint(remote.URL)
	require.NoError(t, err)
	ep.InsecureSkipTLS = true // none is set today; one added later must not crash the operator
	c, err := client.NewClient(ep)
	require.NoError(t, err)

	require.NotPanics(t, func() {
		_, err = c.NewUploadPackSession(ep, nil)
	})
	assert.ErrorContains(t, err, "transport")
}
