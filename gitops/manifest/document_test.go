package manifest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

func TestDocument(t *testing.T) {
	file := []byte(`# two objects
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: team-a
data:
  k: v
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: team-a
spec:
  replicas: 2
  template:
    spec:
      terminationGracePeriodSeconds: 1.5
`)
	tests := []struct {
		name string
		id   manifest.Identity
		want map[string]any
	}{
		{
			name: "returns the document with the identity, numbers as client-go holds them",
			id:   manifest.Identity{Group: "apps", Kind: "Deployment", Namespace: "team-a", Name: "api"},
			want: map[string]any{
				"apiVersion": "apps/v1",
				"kind":       "Deployment",
				"metadata":   map[string]any{"name": "api", "namespace": "team-a"},
				"spec": map[string]any{
					"replicas": int64(2),
					"template": map[string]any{"spec": map[string]any{"terminationGracePeriodSeconds": 1.5}},
				},
			},
		},
		{
			name: "returns nil when no document has the identity",
			id:   manifest.Identity{Kind: "ConfigMap", Namespace: "team-b", Name: "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := manifest.Document(file, tt.id)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDocumentOfEmptyContentIsNil(t *testing.T) {
	got, err := manifest.Document(nil, manifest.Identity{Kind: "ConfigMap", Name: "a"})
	require.NoError(t, err)
	assert.Nil(t, got)
}

func TestDocumentRefusesUnparseableContent(t *testing.T) {
	_, err := manifest.Document([]byte("a: [\n"), manifest.Identity{Kind: "ConfigMap", Name: "a"})
	assert.ErrorIs(t, err, manifest.ErrUnparseable)
}
