package batch

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
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

// clientSideAppliedConfigMap is liveConfigMap as `kubectl apply` (client-side) leaves it:
// its Update entry claims every field, the last-applied configuration has only data.k.
func clientSideAppliedConfigMap() *unstructured.Unstructured {
	obj := liveConfigMap()
	metadata := obj.Object["metadata"].(map[string]any)
	metadata["annotations"] = map[string]any{
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"ConfigMap",` +
			`"metadata":{"annotations":{},"name":"app","namespace":"team-a"},"data":{"k":"v"}}`,
	}
	metadata["managedFields"] = []any{map[string]any{
		"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubectl-client-side-apply", "operation": "Update",
		"fieldsV1": map[string]any{
			"f:data": map[string]any{"f:k": map[string]any{}}, "f:immutable": map[string]any{}, "f:extra": map[string]any{},
			"f:metadata": map[string]any{"f:annotations": map[string]any{
				".": map[string]any{}, "f:kubectl.kubernetes.io/last-applied-configuration": map[string]any{},
			}},
		},
	}}
	return obj
}

func TestWritable(t *testing.T) {
	tests := []struct {
		name    string
		live    func() *unstructured.Unstructured
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
			name: "reads the last-applied configuration before stripping it and leaves out what client-side apply never applied",
			live: clientSideAppliedConfigMap,
			want: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "app", "namespace": "team-a"},
				"data":     map[string]any{"k": "v"},
			},
		},
		{
			name: "keeps the clusterIP a manifest pinned and the None of a headless Service, not the allocated clusterIPs",
			live: func() *unstructured.Unstructured { return liveService("10.96.0.10") },
			want: map[string]any{
				"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": "dns", "namespace": "team-a"},
				"spec":     map[string]any{"clusterIP": "10.96.0.10", "selector": map[string]any{"app": "dns"}},
			},
		},
		{
			name: "keeps clusterIP None of a headless Service",
			live: func() *unstructured.Unstructured { return liveService("None") },
			want: map[string]any{
				"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": "dns", "namespace": "team-a"},
				"spec":     map[string]any{"clusterIP": "None", "selector": map[string]any{"app": "dns"}},
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
			live := orLiveConfigMap(tt.live)
			got := w.writable(live(), []byte(tt.content))
			assert.Equal(t, tt.want, got.Object)
		})
	}
}

// liveService is a Service whose manifest, applied server-side, set clusterIP (an address,
// or None for a headless Service); the server derived clusterIPs from it.
func liveService(clusterIP string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{
			"name": "dns", "namespace": "team-a", "uid": "u", "resourceVersion": "7",
			"managedFields": []any{map[string]any{
				"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubectl", "operation": "Apply",
				"fieldsV1": map[string]any{"f:spec": map[string]any{"f:clusterIP": map[string]any{}, "f:selector": map[string]any{}}},
			}},
		},
		"spec": map[string]any{"clusterIP": clusterIP, "clusterIPs": []any{clusterIP}, "selector": map[string]any{"app": "dns"},
			"type": "ClusterIP", "sessionAffinity": "None"},
	}}
}

func TestUnchangedAtTip(t *testing.T) {
	const file = "live/team-a/app.yaml"
	const head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\n"
	tests := []struct {
		name    string
		live    func() *unstructured.Unstructured
		content string
		keepAll bool
		plan    func(p *writePlan)
		behind  bool // the index describes an older commit than the worker's tip
		want    bool
		changes bool // the full edit changes the file: skipping would lose the change
	}{
		{name: "skips a document holding only the owned fields", content: head + "data:\n  k: v\n", want: true},
		{name: "skips a document holding every field", content: head + "data:\n  k: v\nextra: unowned\nimmutable: false\n", want: true},
		{name: "skips a document written with comments, quotes and another key order",
			content: "# kept\nkind: ConfigMap\ndata: {k: \"v\"}\napiVersion: v1\nmetadata: {namespace: team-a, name: app}\n", want: true},
		{name: "edits a document whose value changed", content: head + "data:\n  k: old\n"},
		{name: "leaves a document with some of the unowned fields to the full edit", content: head + "data:\n  k: v\nimmutable: false\n"},
		{name: "edits an owned-only document when every field is kept", content: head + "data:\n  k: v\n", keepAll: true},
		{name: "does not skip a file this plan already edits", content: head + "data:\n  k: v\n",
			plan: func(p *writePlan) { p.files[file] = []byte(head + "data:\n  k: v\n") }},
		{name: "does not skip an object this plan placed", content: head + "data:\n  k: v\n",
			plan: func(p *writePlan) { p.located[manifest.IdentityOf(liveConfigMap())] = file }},
		{name: "does not trust an index a failed re-analysis left behind the tip", content: head + "data:\n  k: v\n", behind: true},
		{name: "edits a document with every field when ownership is unknown, since only the owned ones are written",
			live: brokenLastAppliedConfigMap, content: head + "data:\n  k: v\nextra: unowned\nimmutable: false\n", changes: true},
		{name: "edits a document the trim would extend: list items kept by position",
			live: positionalListObject, content: head + "steps:\n- b\n", changes: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &worker{opts: Options{KeepDefaultedFields: tt.keepAll}, log: logr.Discard()}
			live := orLiveConfigMap(tt.live)
			tgt := &target{}
			ix := newFolderIndex(nil, nil)
			require.NoError(t, ix.setFile(file, []byte(tt.content), nil))
			tgt.index.Store(ix)
			if tt.behind {
				w.remoteTip = plumbing.NewHash("1111111111111111111111111111111111111111")
			}
			p := &writePlan{files: map[string][]byte{}, located: map[manifest.Identity]string{}}
			if tt.plan != nil {
				tt.plan(p)
			}
			got := w.unchangedAtTip(tgt, p, manifest.IdentityOf(live()), live(), w.forms(live(), true))
			assert.Equal(t, tt.want, got)
			content := []byte(tt.content)
			_, changed, err := manifest.UpsertStyled(content, w.writable(live(), content), manifest.Style{})
			require.NoError(t, err)
			if got {
				assert.False(t, changed, "the full edit must agree that nothing changed")
			}
			if tt.changes {
				assert.True(t, changed, "the case is one where a wrong skip would lose a change")
			}
		})
	}
}

// brokenLastAppliedConfigMap is clientSideAppliedConfigMap with a last-applied annotation
// that does not parse: ownership is taken as recorded and DropUnowned says it is unknown.
func brokenLastAppliedConfigMap() *unstructured.Unstructured {
	obj := clientSideAppliedConfigMap()
	metadata := obj.Object["metadata"].(map[string]any)
	metadata["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{not json"}
	metadata["managedFields"] = []any{map[string]any{
		"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubectl-client-side-apply", "operation": "Update",
		"fieldsV1": map[string]any{"f:data": map[string]any{"f:k": map[string]any{}}},
	}}
	return obj
}

// positionalListObject is team-a/app with a list whose second item alone is owned: the
// owned-only form is [b], and trimming over a document holding [b] keeps [a, b] (items are
// matched by position).
func positionalListObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "app", "namespace": "team-a",
			"managedFields": []any{map[string]any{
				"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "tool", "operation": "Update",
				"fieldsV1": map[string]any{"f:steps": map[string]any{"i:1": map[string]any{}}},
			}},
		},
		"steps": []any{"a", "b"},
	}}
}

// orLiveConfigMap is live, or liveConfigMap when live is nil (a case's default object).
func orLiveConfigMap(live func() *unstructured.Unstructured) func() *unstructured.Unstructured {
	if live == nil {
		return liveConfigMap
	}
	return live
}
