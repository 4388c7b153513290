package replica_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"github.com/gitops-reverser/gitops-reverser/test/testcerts"
)

func TestARefusedReplicaRequestClosesItsConnection(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/attribution/records", nil) // no client certificate
	assert.False(t, replica.Admit(rec, req, testcerts.ReplicaKeyPair(t), nil, logr.Discard(), "a test"))
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Equal(t, "close", rec.Header().Get("Connection"), "the client dials again, with the key it holds then")
}
