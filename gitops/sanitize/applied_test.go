package sanitize_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
)

// csaDeployment is a Deployment as `kubectl apply` (client-side) leaves it: the
// last-applied configuration names replicas, the selector and one container; the
// kubectl-client-side-apply entry also claims the defaults. extra is appended to the
// managedFields list.
const csaDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"api"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"api"}},"template":{"spec":{"containers":[{"image":"nginx","name":"app"}]}}}}
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {}
          f:kubectl.kubernetes.io/last-applied-configuration: {}
      f:spec:
        f:replicas: {}
        f:revisionHistoryLimit: {}
        f:selector: {}
        f:template:
          f:spec:
            f:containers:
              k:{"name":"app"}:
                .: {}
                f:image: {}
                f:imagePullPolicy: {}
                f:name: {}
            f:dnsPolicy: {}
`

// csaDeploymentSpec is csaDeployment's spec as the API server returns it.
const csaDeploymentSpec = `
spec:
  replicas: 2
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: api
  template:
    spec:
      containers:
      - name: app
        image: nginx
        imagePullPolicy: Always
      dnsPolicy: ClusterFirst
`

// csaDeploymentApplied is what the user applied, as the writer should write it.
const csaDeploymentApplied = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 2
  selector:
    matchLabels:
      app: api
  template:
    spec:
      containers:
      - name: app
        image: nginx
`

func TestDropUnownedClientSideApply(t *testing.T) {
	tests := []dropCase{
		{
			name: "drops a dnsPolicy that client-side apply owns but never applied",
			live: csaDeployment + csaDeploymentSpec,
			want: csaDeploymentApplied,
		},
		{
			name: "keeps a field kubectl edit set later",
			live: csaDeployment + `
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: kubectl-edit
    operation: Update
    fieldsV1:
      f:spec:
        f:template:
          f:spec:
            f:terminationGracePeriodSeconds: {}
` + csaDeploymentSpec + `
      terminationGracePeriodSeconds: 5
`,
			want: csaDeploymentApplied + `
      terminationGracePeriodSeconds: 5
`,
		},
		{
			name: "keeps a default another manager also owns",
			live: csaDeployment + `
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    manager: tuner
    operation: Apply
    fieldsV1:
      f:spec:
        f:revisionHistoryLimit: {}
` + csaDeploymentSpec,
			want: csaDeploymentApplied + `
  revisionHistoryLimit: 10
`,
		},
		{
			name:     "keeps a default Git already has although client-side apply never applied it",
			live:     csaDeployment + csaDeploymentSpec,
			existing: csaDeploymentApplied + "\n      dnsPolicy: ClusterFirst\n",
			want:     csaDeploymentApplied + "\n      dnsPolicy: ClusterFirst\n",
		},
		{
			name: "keeps everything when the last-applied annotation does not parse",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":'
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    fieldsV1:
      f:data:
        f:k: {}
      f:immutable: {}
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
			wantErr: true,
		},
		{
			name: "keeps everything when the last-applied configuration is of another kind",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","kind":"Secret","data":{"k":"dg=="}}'
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
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
data:
  k: v
`,
			wantErr: true,
		},
		{
			name: "ignores a last-applied annotation that does not parse when client-side apply owns nothing",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":'
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl
    operation: Apply
    fieldsV1:
      f:data:
        f:k: {}
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
`,
		},
		{
			name: "counts client-side apply's fields as recorded without the last-applied annotation",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    fieldsV1:
      f:data:
        f:k: {}
      f:immutable: {}
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
			name: "narrows only the client-side apply entry, not an Update of another manager",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}'
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl-create
    operation: Update
    fieldsV1:
      f:data:
        f:k: {}
      f:immutable: {}
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
			name: "matches a Service port whose defaulted protocol the user left out",
			live: `
apiVersion: v1
kind: Service
metadata:
  name: web
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"ports":[{"port":80,"targetPort":8080}]}}'
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    fieldsV1:
      f:spec:
        f:ports:
          .: {}
          k:{"port":80,"protocol":"TCP"}:
            .: {}
            f:port: {}
            f:protocol: {}
            f:targetPort: {}
        f:sessionAffinity: {}
        f:type: {}
spec:
  ports:
  - port: 80
    protocol: TCP
    targetPort: 8080
  sessionAffinity: None
  type: ClusterIP
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
			name: "keeps both ports that share a number when the user left out the protocol that tells them apart",
			live: `
apiVersion: v1
kind: Service
metadata:
  name: dns
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","kind":"Service","metadata":{"name":"dns"},"spec":{"ports":[{"port":53,"protocol":"UDP","name":"udp"},{"port":53,"name":"tcp"}]}}'
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    fieldsV1:
      f:spec:
        f:ports:
          .: {}
          k:{"port":53,"protocol":"TCP"}:
            .: {}
            f:name: {}
            f:port: {}
            f:protocol: {}
          k:{"port":53,"protocol":"UDP"}:
            .: {}
            f:name: {}
            f:port: {}
            f:protocol: {}
spec:
  ports:
  - name: udp
    port: 53
    protocol: UDP
  - name: tcp
    port: 53
    protocol: TCP
`,
			want: `
apiVersion: v1
kind: Service
metadata:
  name: dns
spec:
  ports:
  - name: udp
    port: 53
    protocol: UDP
  - name: tcp
    port: 53
`,
		},
		{
			name: "counts a stringData key in the last-applied configuration as its data key",
			live: `
apiVersion: v1
kind: Secret
metadata:
  name: db
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"stringData":{"password":"hunter2"}}'
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    fieldsV1:
      f:data:
        .: {}
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
`,
		},
		{
			name: "keeps the applied items of a set and drops the ones only client-side apply claims",
			live: `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  finalizers: [a, b]
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","finalizers":["a"]}}'
  managedFields:
  - apiVersion: example.com/v1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
    fieldsV1:
      f:metadata:
        f:finalizers:
          .: {}
          v:"a": {}
          v:"b": {}
`,
			want: `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  finalizers: [a]
`,
		},
	}
	// Compared as written, without the last-applied annotation, which Object removes.
	runDropCases(t, tests, func(got *unstructured.Unstructured) map[string]any { return sanitize.Object(got).Object })
}
