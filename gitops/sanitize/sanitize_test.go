package sanitize_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func TestObject(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{
			name: "drops status, server-owned metadata and ownerReferences but keeps name and labels",
			in: map[string]any{
				"apiVersion": "apps/v1",
				"kind":       "Deployment",
				"metadata": map[string]any{
					"name":                       "api",
					"namespace":                  "team-a",
					"uid":                        "0c1b8a52-1111-2222-3333-444455556666",
					"resourceVersion":            "4711",
					"generation":                 int64(3),
					"creationTimestamp":          "2024-01-01T00:00:00Z",
					"selfLink":                   "/apis/apps/v1/namespaces/team-a/deployments/api",
					"deletionTimestamp":          "2024-01-02T00:00:00Z",
					"deletionGracePeriodSeconds": int64(30),
					"managedFields":              []any{map[string]any{"manager": "kubectl"}},
					"labels":                     map[string]any{"app": "api"},
					"ownerReferences":            []any{map[string]any{"name": "owner"}},
				},
				"spec":   map[string]any{"replicas": int64(2)},
				"status": map[string]any{"readyReplicas": int64(2)},
			},
			want: map[string]any{
				"apiVersion": "apps/v1",
				"kind":       "Deployment",
				"metadata": map[string]any{
					"name":      "api",
					"namespace": "team-a",
					"labels":    map[string]any{"app": "api"},
				},
				"spec": map[string]any{"replicas": int64(2)},
			},
		},
		{
			name: "drops managedFields but keeps immutable",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata": map[string]any{
					"name":          "app",
					"managedFields": []any{},
				},
				"immutable": true,
				"data":      map[string]any{"k": "v"},
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata":   map[string]any{"name": "app"},
				"immutable":  true,
				"data":       map[string]any{"k": "v"},
			},
		},
		{
			name: "drops the last-applied annotation and the annotations map it leaves empty",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata": map[string]any{
					"name":        "app",
					"annotations": map[string]any{sanitize.LastAppliedAnnotation: "{}"},
				},
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata":   map[string]any{"name": "app"},
			},
		},
		{
			name: "keeps other annotations when dropping the last-applied annotation",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata": map[string]any{
					"name": "app",
					"annotations": map[string]any{
						sanitize.LastAppliedAnnotation: "{}",
						"team":                         "a",
					},
				},
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata": map[string]any{
					"name":        "app",
					"annotations": map[string]any{"team": "a"},
				},
			},
		},
		{
			name: "drops an annotations map that is already empty",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata":   map[string]any{"name": "app", "annotations": map[string]any{}},
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata":   map[string]any{"name": "app"},
			},
		},
		{
			name: "drops clusterIP and clusterIPs of a core Service but keeps its ports",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "Service",
				"metadata":   map[string]any{"name": "web"},
				"spec": map[string]any{
					"clusterIP":  "10.0.0.12",
					"clusterIPs": []any{"10.0.0.12"},
					"ports":      []any{map[string]any{"port": int64(80)}},
				},
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "Service",
				"metadata":   map[string]any{"name": "web"},
				"spec": map[string]any{
					"ports": []any{map[string]any{"port": int64(80)}},
				},
			},
		},
		{
			name: "keeps clusterIP None of a headless Service, which the server never allocates",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "Service",
				"metadata":   map[string]any{"name": "db"},
				"spec":       map[string]any{"clusterIP": "None", "clusterIPs": []any{"None"}, "selector": map[string]any{"app": "db"}},
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "Service",
				"metadata":   map[string]any{"name": "db"},
				"spec":       map[string]any{"clusterIP": "None", "clusterIPs": []any{"None"}, "selector": map[string]any{"app": "db"}},
			},
		},
		{
			name: "keeps a clusterIP a field manager owns (pinned in the manifest), dropping the clusterIPs the server derived",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "Service",
				"metadata": map[string]any{"name": "dns", "managedFields": []any{map[string]any{
					"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
					"fieldsV1": map[string]any{"f:spec": map[string]any{"f:clusterIP": map[string]any{}, "f:ports": map[string]any{}}},
				}}},
				"spec": map[string]any{"clusterIP": "10.96.0.10", "clusterIPs": []any{"10.96.0.10"}},
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "Service",
				"metadata":   map[string]any{"name": "dns"},
				"spec":       map[string]any{"clusterIP": "10.96.0.10"},
			},
		},
		{
			name: "keeps clusterIP of a custom resource that is also called Service",
			in: map[string]any{
				"apiVersion": "serving.knative.dev/v1",
				"kind":       "Service",
				"metadata":   map[string]any{"name": "web"},
				"spec":       map[string]any{"clusterIP": "10.0.0.12"},
			},
			want: map[string]any{
				"apiVersion": "serving.knative.dev/v1",
				"kind":       "Service",
				"metadata":   map[string]any{"name": "web"},
				"spec":       map[string]any{"clusterIP": "10.0.0.12"},
			},
		},
		{
			name: "keeps the StorageClass provisioner and other top-level fields",
			in: map[string]any{
				"apiVersion":           "storage.k8s.io/v1",
				"kind":                 "StorageClass",
				"metadata":             map[string]any{"name": "fast"},
				"provisioner":          "ebs.csi.aws.com",
				"parameters":           map[string]any{"type": "gp3"},
				"reclaimPolicy":        "Retain",
				"allowVolumeExpansion": true,
			},
			want: map[string]any{
				"apiVersion":           "storage.k8s.io/v1",
				"kind":                 "StorageClass",
				"metadata":             map[string]any{"name": "fast"},
				"provisioner":          "ebs.csi.aws.com",
				"parameters":           map[string]any{"type": "gp3"},
				"reclaimPolicy":        "Retain",
				"allowVolumeExpansion": true,
			},
		},
		{
			name: "keeps unknown top-level fields of a custom resource",
			in: map[string]any{
				"apiVersion": "example.com/v1",
				"kind":       "Widget",
				"metadata":   map[string]any{"name": "w"},
				"size":       int64(3),
				"colors":     []any{"red", "blue"},
				"status":     map[string]any{"phase": "Ready"},
			},
			want: map[string]any{
				"apiVersion": "example.com/v1",
				"kind":       "Widget",
				"metadata":   map[string]any{"name": "w"},
				"size":       int64(3),
				"colors":     []any{"red", "blue"},
			},
		},
		{
			name: "drops the status the server gives a StatefulSet's volumeClaimTemplates",
			in: map[string]any{
				"apiVersion": "apps/v1",
				"kind":       "StatefulSet",
				"metadata":   map[string]any{"name": "db"},
				"spec": map[string]any{"volumeClaimTemplates": []any{
					map[string]any{"metadata": map[string]any{"name": "data"}, "status": map[string]any{"phase": "Pending"}},
					"not-a-map",
				}},
			},
			want: map[string]any{
				"apiVersion": "apps/v1",
				"kind":       "StatefulSet",
				"metadata":   map[string]any{"name": "db"},
				"spec": map[string]any{"volumeClaimTemplates": []any{
					map[string]any{"metadata": map[string]any{"name": "data"}},
					"not-a-map",
				}},
			},
		},
		{
			name: "drops the revision annotation the Deployment controller bumps at every rollout",
			in: map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": "web", "annotations": map[string]any{"deployment.kubernetes.io/revision": "7"}},
				"spec":     map[string]any{"replicas": int64(2)},
			},
			want: map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": "web"},
				"spec":     map[string]any{"replicas": int64(2)},
			},
		},
		{
			name: "drops a Job's generated selector and controller-uid labels, which another cluster's API server refuses",
			in: map[string]any{
				"apiVersion": "batch/v1", "kind": "Job",
				"metadata": map[string]any{"name": "migrate", "labels": map[string]any{"controller-uid": "0b1c", "app": "db"}},
				"spec": map[string]any{
					"selector": map[string]any{"matchLabels": map[string]any{"batch.kubernetes.io/controller-uid": "0b1c"}},
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{
						"batch.kubernetes.io/controller-uid": "0b1c", "controller-uid": "0b1c", "job-name": "migrate", "app": "db"}}},
				},
			},
			want: map[string]any{
				"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate", "labels": map[string]any{"app": "db"}},
				"spec": map[string]any{
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"job-name": "migrate", "app": "db"}}},
				},
			},
		},
		{
			name: "keeps the selector of a Job that sets manualSelector",
			in: map[string]any{
				"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate"},
				"spec": map[string]any{"manualSelector": true, "selector": map[string]any{"matchLabels": map[string]any{"app": "db"}}},
			},
			want: map[string]any{
				"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate"},
				"spec": map[string]any{"manualSelector": true, "selector": map[string]any{"matchLabels": map[string]any{"app": "db"}}},
			},
		},
		{
			name: "drops what the tokens controller fills into a service-account token Secret, which another cluster's deletes",
			in: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
				"metadata": map[string]any{"name": "ci-token", "annotations": map[string]any{
					"kubernetes.io/service-account.name": "ci", "kubernetes.io/service-account.uid": "0b1c"}},
				"data": map[string]any{"token": "ZXlK", "ca.crt": "LS0t", "namespace": "dGVhbS1h"},
			},
			want: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
				"metadata": map[string]any{"name": "ci-token", "annotations": map[string]any{"kubernetes.io/service-account.name": "ci"}},
			},
		},
		{
			name: "drops the labels the cluster keeps on a legacy token: the day it was last used, and when it was marked invalid",
			in: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
				"metadata": map[string]any{"name": "ci-token", "labels": map[string]any{
					"kubernetes.io/legacy-token-last-used": "2026-12-07", "kubernetes.io/legacy-token-invalid-since": "2026-12-07", "team": "ci"},
					"annotations": map[string]any{"kubernetes.io/service-account.name": "ci"}},
			},
			want: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
				"metadata": map[string]any{"name": "ci-token", "labels": map[string]any{"team": "ci"},
					"annotations": map[string]any{"kubernetes.io/service-account.name": "ci"}},
			},
		},
		{
			name: "drops the TTL annotation the cluster moves on every Node as it grows",
			in: map[string]any{
				"apiVersion": "v1", "kind": "Node",
				"metadata": map[string]any{"name": "worker-1", "annotations": map[string]any{"node.alpha.kubernetes.io/ttl": "15"}},
				"spec":     map[string]any{"podCIDR": "10.244.1.0/24"},
			},
			want: map[string]any{
				"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "worker-1"},
				"spec": map[string]any{"podCIDR": "10.244.1.0/24"},
			},
		},
		{
			name: "keeps the data of a Secret of another type",
			in: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": map[string]any{"name": "db"},
				"data": map[string]any{"token": "ZXlK", "ca.crt": "LS0t"},
			},
			want: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": map[string]any{"name": "db"},
				"data": map[string]any{"token": "ZXlK", "ca.crt": "LS0t"},
			},
		},
		{
			name: "tolerates an object without metadata",
			in:   map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "status": "x"},
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"},
		},
		{
			name: "tolerates metadata and annotations of unexpected types",
			in: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata":   map[string]any{"name": "app", "annotations": "oops"},
				"spec":       "not-a-map",
			},
			want: map[string]any{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata":   map[string]any{"name": "app", "annotations": "oops"},
				"spec":       "not-a-map",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sanitize.Object(&unstructured.Unstructured{Object: tt.in})
			assert.Equal(t, tt.want, got.Object)
		})
	}
}

func TestObjectLeavesTheInputUntouched(t *testing.T) {
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata": map[string]any{
			"name":        "web",
			"uid":         "u",
			"annotations": map[string]any{sanitize.LastAppliedAnnotation: "{}"},
		},
		"spec":   map[string]any{"clusterIP": "10.0.0.1", "ports": []any{map[string]any{"port": int64(80)}}},
		"status": map[string]any{},
	}}
	before := in.DeepCopy()

	got := sanitize.Object(in)
	got.Object["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"] = int64(81)

	assert.Equal(t, before.Object, in.Object)
}

func TestObjectReturnsNilForNil(t *testing.T) {
	assert.Nil(t, sanitize.Object(nil))
}

func TestObjectGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.input.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".input.yaml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(input)
			require.NoError(t, err)
			obj := &unstructured.Unstructured{}
			jsonBytes, err := yaml.YAMLToJSON(raw)
			require.NoError(t, err)
			require.NoError(t, obj.UnmarshalJSON(jsonBytes))

			got, err := yaml.Marshal(sanitize.Object(obj).Object)
			require.NoError(t, err)

			assertGolden(t, filepath.Join("testdata", name+".golden.yaml"), got)
		})
	}
}

// assertGolden compares got with the golden file, rewriting it first under -update.
func assertGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}
