package batch

import (
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// benchConfigMap is a ConfigMap as the API server returns one created by a client (the
// writer benchmark's objects): server state, one Update entry claiming labels and data.
func benchConfigMap() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name": "cm-00042", "namespace": "writer-cd", "uid": "0b6f5c1e-9d0e-4d39-8a55-1f7c2b7e9a10",
			"resourceVersion": "123456", "creationTimestamp": "2026-12-03T07:48:51Z",
			"labels": map[string]any{"bench": "yes"},
			"managedFields": []any{map[string]any{
				"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "bench.test", "operation": "Update",
				"time": "2026-12-03T07:48:51Z",
				"fieldsV1": map[string]any{
					"f:data":     map[string]any{".": map[string]any{}, "f:team": map[string]any{}, "f:v": map[string]any{}},
					"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:bench": map[string]any{}}},
				},
			}},
		},
		"data": map[string]any{"team": "bench", "v": "0"},
	}}
}

// BenchmarkPlanNewObject is the plan's work for one object of an initial snapshot: the
// written form of a live ConfigMap, rendered into a new file and read back.
func BenchmarkPlanNewObject(b *testing.B) {
	w := &worker{log: logr.Discard()}
	live := benchConfigMap()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := manifest.UpsertStyled(nil, w.writable(live, nil), manifest.Style{}); err != nil {
			b.Fatal(err)
		}
	}
}
