package batch

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// liveConfigMap is a ConfigMap as the informer holds it: kubectl applied data.k
// server-side; immutable was defaulted by nobody in particular.
func liveConfigMap() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name": "app", "namespace": "team-a", "uid": "u", "resourceVersion": "7",
			"managedFields": []any{map[string]any{
				"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubectl", "operation": "Apply",
				"fieldsV1": map[string]any{"f:data": map[string]any{"f:k": map[string]any{}}},
			}},
		},
		"data":      map[string]any{"k": "v"},
		"immutable": false,
		"extra":     "unowned",
	}}
}

func TestWritable(t *testing.T) {
	tests := []struct {
		name    string
		keepAll bool
		content string
		want    map[string]any
	}{
		{
			name: "leaves unowned fields out of a new document and strips server state",
			want: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "app", "namespace": "team-a"},
				"data":     map[string]any{"k": "v"},
			},
		},
		{
			name:    "keeps an unowned field the file already has for the object",
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\nimmutable: false\n",
			want: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata":  map[string]any{"name": "app", "namespace": "team-a"},
				"data":      map[string]any{"k": "v"},
				"immutable": false,
			},
		},
		{
			name:    "writes every field with KeepDefaultedFields",
			keepAll: true,
			want: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata":  map[string]any{"name": "app", "namespace": "team-a"},
				"data":      map[string]any{"k": "v"},
				"immutable": false,
				"extra":     "unowned",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &worker{opts: Options{KeepDefaultedFields: tt.keepAll}, log: logr.Discard()}
			got := w.writable(liveConfigMap(), []byte(tt.content))
			assert.Equal(t, tt.want, got.Object)
		})
	}
}
