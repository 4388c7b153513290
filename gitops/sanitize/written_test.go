package sanitize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSameWritten(t *testing.T) {
	entry := func(manager string, fields map[string]any) any {
		return map[string]any{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-12-06T10:00:00Z",
			"fieldsType": "FieldsV1", "fieldsV1": fields}
	}
	ownsData := entry("kubectl", map[string]any{"f:data": map[string]any{"f:k": map[string]any{}}})
	ownsNote := func(manager string) any {
		return entry(manager, map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{"f:note": map[string]any{}}}})
	}
	cm := func(mutate func(metadata map[string]any)) *unstructured.Unstructured {
		metadata := map[string]any{"name": "app", "namespace": "team-a", "managedFields": []any{ownsData}}
		if mutate != nil {
			mutate(metadata)
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
			"data": map[string]any{"k": "v"}}}
	}
	noted := func(manager string) func(map[string]any) {
		return func(m map[string]any) {
			m["annotations"] = map[string]any{"note": "x"}
			m["managedFields"] = []any{ownsData, ownsNote(manager)}
		}
	}
	deleting := func(finalizers ...any) func(map[string]any) {
		return func(m map[string]any) {
			m["deletionTimestamp"] = "2026-12-06T10:05:00Z"
			m["finalizers"] = finalizers
		}
	}
	cases := []struct {
		name     string
		old, obj *unstructured.Unstructured
		whole    bool
		want     bool
	}{
		{"is the same when only a cluster controller's own field changes", cm(nil), cm(noted("kube-controller-manager")), false, true},
		{"is not the same when a person adds an annotation", cm(nil), cm(noted("kubectl-annotate")), false, false},
		{"is not the same when the object is written whole, as an encrypted one is", cm(nil), cm(noted("kube-controller-manager")), true, false},
		{"is not the same when a label changes, which routes the object",
			cm(nil), cm(func(m map[string]any) { m["labels"] = map[string]any{"team": "b"} }), false, false},
		{"is not the same for any change of an object whose ownership is unknown",
			cm(func(m map[string]any) { delete(m, "managedFields") }),
			cm(func(m map[string]any) { delete(m, "managedFields"); m["annotations"] = map[string]any{"note": "x"} }), false, false},
		{"is the same when a graceful delete sets deletionTimestamp", cm(nil), cm(deleting()), false, true},
		{"is the same when a controller removes its finalizer from an object being deleted",
			cm(deleting("example.com/cleanup")), cm(deleting()), false, true},
		{"is not the same when an operator adds its finalizer to an object not being deleted",
			cm(nil), cm(func(m map[string]any) {
				m["finalizers"] = []any{"example.com/cleanup"}
				m["managedFields"] = []any{ownsData, entry("example-operator",
					map[string]any{"f:metadata": map[string]any{"f:finalizers": map[string]any{".": map[string]any{}, `v:"example.com/cleanup"`: map[string]any{}}}})}
			}), false, false},
		{"is not the same without an old object", nil, cm(nil), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SameWritten(tc.old, tc.obj, tc.whole))
		})
	}
}
