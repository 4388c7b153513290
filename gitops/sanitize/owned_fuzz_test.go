package sanitize_test

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
)

// FuzzDropUnowned feeds arbitrary objects, managedFields and documents from Git: the
// function must never panic, never modify its inputs, always keep the identity, and keep
// only values the object has (it removes, never invents); the same again with the entry
// as client-side apply's and the document from Git as its last-applied configuration.
// The seed corpus is in
// testdata/fuzz/FuzzDropUnowned and is replayed by `go test`.
func FuzzDropUnowned(f *testing.F) {
	f.Add(`{"spec":{"replicas":2,"template":{"spec":{"dnsPolicy":"ClusterFirst"}}}}`,
		`{"f:spec":{"f:replicas":{}}}`, `{"spec":{"template":{"spec":{"dnsPolicy":"Default"}}}}`)
	f.Add(`{"spec":{"ports":[{"port":80,"protocol":"TCP","name":"http"}]}}`,
		`{"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}}}}`, `{"spec":{"ports":[{"port":80,"name":"http"}]}}`)
	f.Add(`{"apiVersion":"v1","kind":"Thing","spec":{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]}}`,
		`{"f:spec":{"f:ports":{"k:{\"port\":53,\"protocol\":\"TCP\"}":{"f:port":{}},"k:{\"port\":53,\"protocol\":\"UDP\"}":{"f:port":{}}}}}`,
		`{"apiVersion":"v1","kind":"Thing","spec":{"ports":[{"port":53}]}}`)
	f.Add(`{"metadata":{"finalizers":["a","b"]},"steps":[{"run":"a"},1,null]}`,
		`{"f:metadata":{"f:finalizers":{"v:\"a\"":{}}},"f:steps":{"i:1":{}}}`, `{"steps":[{"run":"a"}]}`)
	f.Fuzz(func(t *testing.T, object, fieldsV1, existing string) {
		var obj, fields, ex map[string]any
		if utiljson.Unmarshal([]byte(object), &obj) != nil || obj == nil {
			return
		}
		if utiljson.Unmarshal([]byte(fieldsV1), &fields) != nil {
			return
		}
		_ = utiljson.Unmarshal([]byte(existing), &ex)
		metadata, _ := obj["metadata"].(map[string]any)
		if metadata == nil {
			metadata = map[string]any{}
			obj["metadata"] = metadata
		}
		obj["apiVersion"], obj["kind"], metadata["name"] = "v1", "Thing", "x"
		metadata["managedFields"] = []any{map[string]any{"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "m", "fieldsV1": fields}}
		checkDropUnowned(t, obj, ex)
		// The same, as client-side apply with the document from Git as what it applied.
		metadata["managedFields"] = []any{map[string]any{"apiVersion": "v1", "fieldsType": "FieldsV1",
			"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": fields}}
		metadata["annotations"] = map[string]any{sanitize.LastAppliedAnnotation: existing}
		checkDropUnowned(t, obj, ex)
	})
}

// checkDropUnowned runs DropUnowned on obj and fails unless obj is left as it was, the
// result keeps the identity and has only values obj has.
func checkDropUnowned(t *testing.T, obj, ex map[string]any) {
	t.Helper()
	before, _ := json.Marshal(obj)
	got, _ := sanitize.DropUnowned(&unstructured.Unstructured{Object: obj}, ex)
	after, _ := json.Marshal(obj)
	if string(before) != string(after) {
		t.Fatalf("input modified")
	}
	if got.GetName() != "x" || got.GetKind() != "Thing" {
		t.Fatalf("identity lost: %v", got.Object)
	}
	if !subset(got.Object, obj) {
		t.Fatalf("result %v is not part of %v", got.Object, obj)
	}
}

// subset reports whether every value in got is in obj at the same place (list items in
// the same relative order).
func subset(got, obj any) bool {
	switch g := got.(type) {
	case map[string]any:
		o, ok := obj.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range g {
			ov, present := o[k]
			if !present || !subset(v, ov) {
				return false
			}
		}
		return true
	case []any:
		o, ok := obj.([]any)
		if !ok {
			return false
		}
		j := 0
		for _, item := range g {
			for j < len(o) && !subset(item, o[j]) {
				j++
			}
			if j == len(o) {
				return false
			}
			j++
		}
		return true
	default:
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(obj)
		return string(a) == string(b)
	}
}
