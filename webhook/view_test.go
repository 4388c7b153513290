package webhook

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAReplicaAnswersUnavailableUntilItsViewIsBuilt(t *testing.T) {
	view := NewView(nil, logr.Discard())
	served := 0
	h := view.OnceBuilt(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WatchedPath, nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "the API server applies the failurePolicy to a failed call")
	var st metav1.Status
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	assert.Equal(t, metav1.StatusReasonServiceUnavailable, st.Reason)
	assert.Contains(t, st.Message, "has not read the GitTargets and watch rules yet")
	assert.Zero(t, served)

	view.built.Store(true)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WatchedPath, nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, 1, served)
}
