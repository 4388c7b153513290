package attribution

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func deployment(rv string, replicas int64, edit func(map[string]any)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "team-a", "uid": "u1", "resourceVersion": rv, "generation": int64(1),
			"managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec":   map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{"image": "web:1"}}},
		"status": map[string]any{"replicas": int64(1)},
	}}
	if edit != nil {
		edit(u.Object)
	}
	return u
}

func TestScaledOnly(t *testing.T) {
	old := deployment("10", 1, nil)
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want bool
	}{
		{"joins an update that changed the replicas and what the API server keeps with them", deployment("11", 3, func(o map[string]any) {
			md := o["metadata"].(map[string]any)
			md["generation"] = int64(2)
			md["managedFields"] = []any{map[string]any{"manager": "kubectl", "subresource": "scale"}}
			o["status"] = map[string]any{"replicas": int64(3)}
		}), true},
		{"refuses an update that also changed something else", deployment("11", 3, func(o map[string]any) {
			o["spec"].(map[string]any)["template"] = map[string]any{"spec": map[string]any{"image": "web:2"}}
		}), false},
		{"refuses an update that kept the replicas", deployment("11", 1, func(o map[string]any) {
			o["metadata"].(map[string]any)["labels"] = map[string]any{"a": "b"}
		}), false},
		{"refuses another object", deployment("11", 3, func(o map[string]any) { o["metadata"].(map[string]any)["uid"] = "u2" }), false},
		{"refuses a resource scaled elsewhere than spec.replicas", deployment("11", 1, func(o map[string]any) {
			o["spec"].(map[string]any)["workers"] = map[string]any{"count": int64(3)}
		}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ScaledOnly(old, tt.obj))
		})
	}
	assert.False(t, ScaledOnly(nil, old), "a first sighting is no scale")
	assert.Equal(t, Key{Op: Scale, UID: "u1", OldResourceVersion: "10", Replicas: 3}, ScaleKey("u1", "10", 3))
	assert.Equal(t, int64(3), ReplicasOf(deployment("11", 3, nil)))
	assert.Equal(t, int64(0), ReplicasOf(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}),
		"a Scale to 0 omits it")
}

func TestKeyForRequestOfADelete(t *testing.T) {
	live := deployment("10", 1, nil)
	k, ok := KeyForRequest(Delete, nil, live)
	assert.True(t, ok)
	assert.True(t, k.First, "the first delete of an object: an earlier record never took effect")
	waiting := deployment("11", 1, func(o map[string]any) { o["metadata"].(map[string]any)["deletionTimestamp"] = "2026-12-06T20:00:00Z" })
	k, _ = KeyForRequest(Delete, nil, waiting)
	assert.False(t, k.First, "a delete asked for again while the object waits")
	assert.Equal(t, DeleteKey("u1"), k)
}
