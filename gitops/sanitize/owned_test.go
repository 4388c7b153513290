package sanitize_test

import (
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

// fromYAML parses a YAML object the way client-go decodes one from the API server.
func fromYAML(t testing.TB, text string) map[string]any {
	t.Helper()
	if text == "" {
		return nil
	}
	var out map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(text), &out))
	return normalise(out).(map[string]any)
}

// normalise turns sigs.k8s.io/yaml's float64 integers into int64, as client-go does.
func normalise(v any) any {
	switch typed := v.(type) {
	case map[string]any:
		for k, x := range typed {
			typed[k] = normalise(x)
		}
	case []any:
		for i, x := range typed {
			typed[i] = normalise(x)
		}
	case float64:
		if typed == float64(int64(typed)) {
			return int64(typed)
		}
	}
	return v
}

// dropCase is one table case of DropUnowned: the live object, its document in Git
// (existing), the result wanted and whether ErrOwnershipUnknown is wanted with it.
type dropCase struct {
	name     string
	live     string
	existing string
	want     string
	wantErr  bool
}

// runDropCases runs DropUnowned on each case and compares written(result) with want; the
// input must come back unmodified.
func runDropCases(t *testing.T, tests []dropCase, written func(*unstructured.Unstructured) map[string]any) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := fromYAML(t, tt.live)
			before := fromYAML(t, tt.live)
			got, err := sanitize.DropUnowned(&unstructured.Unstructured{Object: live}, fromYAML(t, tt.existing))
			if tt.wantErr {
				require.ErrorIs(t, err, sanitize.ErrOwnershipUnknown)
			} else {
				require.NoError(t, err)
			}
			require.NotNil(t, got)
			assert.Equal(t, fromYAML(t, tt.want), written(got))
			assert.Equal(t, before, live, "the input is never modified")
		})
	}
}

func TestDropUnowned(t *testing.T) {
	tests := []dropCase{
		{
			name: "drops a server-defaulted dnsPolicy from a new Deployment",
			live: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: team-a
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:template:
          f:spec:
            f:restartPolicy: {}
spec:
  revisionHistoryLimit: 10
  template:
    spec:
      dnsPolicy: ClusterFirst
      restartPolicy: Always
`,
			want: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: team-a
spec:
  template:
    spec:
      restartPolicy: Always
`,
		},
		{
			name: "keeps an unowned field already present in Git",
			live: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:replicas: {}
spec:
  replicas: 2
  revisionHistoryLimit: 10
  progressDeadlineSeconds: 600
`,
			existing: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 1
  revisionHistoryLimit: 3
`,
			want: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 2
  revisionHistoryLimit: 10
`,
		},
		{
			name: "keeps the owned children of a container matched by its name key and drops its defaults",
			live: `
apiVersion: v1
kind: Pod
metadata:
  name: p
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:containers:
          k:{"name":"app"}:
            .: {}
            f:image: {}
            f:name: {}
spec:
  containers:
  - name: app
    image: nginx
    imagePullPolicy: Always
    terminationMessagePath: /dev/termination-log
    resources: {}
  - name: injected
    image: sidecar
`,
			want: `
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: app
    image: nginx
`,
		},
		{
			name: "matches a Service port by its two key fields, the defaulted protocol included",
			live: `
apiVersion: v1
kind: Service
metadata:
  name: web
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:ports:
          k:{"port":80,"protocol":"TCP"}:
            .: {}
            f:port: {}
            f:targetPort: {}
spec:
  ports:
  - port: 80
    protocol: TCP
    targetPort: 8080
  sessionAffinity: None
`,
			want: `
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
    targetPort: 8080
`,
		},
		{
			name: "keeps a defaulted key field Git has when Git leaves another key field out",
			live: `
apiVersion: v1
kind: Service
metadata:
  name: web
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:ports:
          k:{"port":80,"protocol":"TCP"}:
            .: {}
            f:port: {}
spec:
  ports:
  - port: 80
    protocol: TCP
    name: http
`,
			existing: `
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
    name: http
`,
			want: `
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
    name: http
`,
		},
		{
			name: "keeps an atomic list whole when its field is owned as a leaf",
			live: `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r
  managedFields:
  - apiVersion: rbac.authorization.k8s.io/v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:rules: {}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
`,
			want: `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
`,
		},
		{
			name: "matches set items by value and keeps only the owned ones",
			live: `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  finalizers: [a, b]
  managedFields:
  - apiVersion: example.com/v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:metadata:
        f:finalizers:
          v:"a": {}
`,
			want: `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  finalizers: [a]
`,
		},
		{
			name: "matches items of a list owned by index",
			live: `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  managedFields:
  - apiVersion: example.com/v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Update
    fieldsV1:
      f:steps:
        i:1:
          f:run: {}
steps:
- run: a
  extra: x
- run: b
  extra: y
`,
			want: `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
steps:
- run: b
`,
		},
		{
			name: "unites the fields of every manager but the cluster's own controllers",
			live: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  annotations:
    deployment.kubernetes.io/revision: "1"
    team: a
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:replicas: {}
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kubectl-annotate
    operation: Update
    fieldsV1:
      f:metadata:
        f:annotations:
          f:team: {}
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kube-controller-manager
    operation: Update
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {}
          f:deployment.kubernetes.io/revision: {}
spec:
  replicas: 2
  paused: false
`,
			want: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  annotations:
    team: a
spec:
  replicas: 2
`,
		},
		{
			name: "leaves out the volume a PersistentVolumeClaim was bound to, which only the binder set",
			live: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  annotations:
    pv.kubernetes.io/bind-completed: "yes"
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:accessModes: {}
        f:resources:
          f:requests:
            f:storage: {}
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kube-controller-manager
    operation: Update
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {}
          f:pv.kubernetes.io/bind-completed: {}
      f:spec:
        f:volumeName: {}
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
  volumeName: pvc-6b1c7d3e
`,
			want: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
`,
		},
		{
			name: "keeps replicas a HorizontalPodAutoscaler set only when someone else owns them too",
			live: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:replicas: {}
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kube-controller-manager
    operation: Update
    fieldsV1:
      f:spec:
        f:replicas: {}
spec:
  replicas: 5
`,
			want: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 5
`,
		},
		{
			name: "keeps what the cluster's controllers set on an object nobody else ever wrote",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-root-ca.crt
  annotations:
    kubernetes.io/description: Contains a CA bundle
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kube-controller-manager
    operation: Update
    fieldsV1:
      f:data:
        .: {}
        f:ca.crt: {}
      f:metadata:
        f:annotations:
          .: {}
          f:kubernetes.io/description: {}
data:
  ca.crt: PEM
`,
			want: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-root-ca.crt
  annotations:
    kubernetes.io/description: Contains a CA bundle
data:
  ca.crt: PEM
`,
		},
		{
			name: "keeps what the cluster's controllers set when another writes only the status",
			live: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-web-0
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kube-controller-manager
    operation: Update
    fieldsV1:
      f:spec:
        f:accessModes: {}
        f:resources:
          f:requests:
            f:storage: {}
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: csi-resizer
    operation: Update
    subresource: status
    fieldsV1:
      f:status:
        f:allocatedResources: {}
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
status:
  allocatedResources:
    storage: 1Gi
`,
			want: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-web-0
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
status:
  allocatedResources:
    storage: 1Gi
`,
		},
		{
			name: "counts ownership of a Secret's stringData key as ownership of its data key",
			live: `
apiVersion: v1
kind: Secret
metadata:
  name: db
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:stringData:
        f:password: {}
      f:type: {}
data:
  password: aHVudGVyMg==
type: Opaque
`,
			want: `
apiVersion: v1
kind: Secret
metadata:
  name: db
data:
  password: aHVudGVyMg==
type: Opaque
`,
		},
		{
			name: "keeps an object without managedFields whole",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  k: v
immutable: false
`,
			want: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  k: v
immutable: false
`,
		},
		{
			name: "keeps the object whole when a manager wrote another apiVersion",
			live: `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: h
  managedFields:
  - apiVersion: autoscaling/v1
    fieldsType: FieldsV1
    manager: old-client
    operation: Update
    fieldsV1:
      f:spec:
        f:targetCPUUtilizationPercentage: {}
spec:
  metrics: []
`,
			want: `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: h
  managedFields:
  - apiVersion: autoscaling/v1
    fieldsType: FieldsV1
    manager: old-client
    operation: Update
    fieldsV1:
      f:spec:
        f:targetCPUUtilizationPercentage: {}
spec:
  metrics: []
`,
			wantErr: true,
		},
		{
			name: "keeps the object whole when fieldsV1 does not parse",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: m
    fieldsV1:
      f:data: 3
data:
  k: v
`,
			want: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: m
    fieldsV1:
      f:data: 3
data:
  k: v
`,
			wantErr: true,
		},
		{
			name: "keeps name and namespace even when no manager lists them",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: team-a
  uid: abc
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: m
    operation: Apply
    fieldsV1:
      f:data:
        f:k: {}
data:
  k: v
`,
			want: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: team-a
data:
  k: v
`,
		},
		{
			name: "keeps the keys Git has of an unowned mapping and drops the others",
			live: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: m
    operation: Apply
    fieldsV1:
      f:spec:
        f:replicas: {}
spec:
  replicas: 1
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
`,
			existing: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  strategy:
    type: RollingUpdate
`,
			want: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 1
  strategy:
    type: RollingUpdate
`,
		},
		{
			name: "keeps the unowned defaults of a container Git already lists",
			live: `
apiVersion: v1
kind: Pod
metadata:
  name: p
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:spec:
        f:containers:
          k:{"name":"app"}:
            .: {}
            f:image: {}
            f:name: {}
spec:
  containers:
  - name: sidecar
    image: s
    imagePullPolicy: Always
  - name: app
    image: nginx:2
    imagePullPolicy: IfNotPresent
    terminationMessagePath: /dev/termination-log
`,
			existing: `
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: app
    image: nginx:1
    imagePullPolicy: IfNotPresent
  - name: sidecar
    image: s
`,
			want: `
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: sidecar
    image: s
  - name: app
    image: nginx:2
    imagePullPolicy: IfNotPresent
`,
		},
	}
	runDropCases(t, tests, func(got *unstructured.Unstructured) map[string]any { return got.Object })
}

func TestDropUnownedReturnsNilForNil(t *testing.T) {
	got, err := sanitize.DropUnowned(nil, nil)
	assert.NoError(t, err)
	assert.Nil(t, got)
}

// Live objects captured from a kube-apiserver 1.37 (server-side and client-side apply,
// patches) as the writer turns them into new documents: Object(DropUnowned(live, nil)).
func TestDropUnownedGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "owned", "*.live.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".live.yaml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(input)
			require.NoError(t, err)
			dropped, err := sanitize.DropUnowned(&unstructured.Unstructured{Object: fromYAML(t, string(raw))}, nil)
			require.NoError(t, err)
			got, err := yaml.Marshal(sanitize.Object(dropped).Object)
			require.NoError(t, err)

			assertGolden(t, filepath.Join("testdata", "owned", name+".golden.yaml"), got)
		})
	}
}

// BenchmarkDropUnowned measures one Deployment as the writer handles it at commit time,
// applied server-side and client-side (which also reads the last-applied annotation).
func BenchmarkDropUnowned(b *testing.B) {
	for _, name := range []string{"deployment-server-side-apply", "deployment-ports-client-side-apply"} {
		b.Run(name, func(b *testing.B) {
			raw, err := os.ReadFile(filepath.Join("testdata", "owned", name+".live.yaml"))
			require.NoError(b, err)
			obj := &unstructured.Unstructured{Object: fromYAML(b, string(raw))}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sanitize.DropUnowned(obj, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
