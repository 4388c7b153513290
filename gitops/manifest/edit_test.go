package manifest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// appObject is the ConfigMap team-a/app with the given data.
func appObject(data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": "app", "namespace": "team-a"},
		"data":       data,
	}}
}

func TestUpsert(t *testing.T) {
	info := appObject(map[string]any{"LOG_LEVEL": "info"})
	tests := []struct {
		name        string
		content     string
		obj         *unstructured.Unstructured
		want        string
		wantChanged bool
	}{
		{
			name:        "replaces the document in place between its neighbours",
			content:     deploymentAPI + "---\n" + configMapApp + "---\n" + clusterRoleAdmin,
			obj:         info,
			want:        deploymentAPI + "---\n" + mustEncode(t, info) + "---\n" + clusterRoleAdmin,
			wantChanged: true,
		},
		{
			name:        "sees an object written with another key order and quoting as unchanged",
			content:     "kind: ConfigMap\napiVersion: 'v1'\ndata: {\"LOG_LEVEL\": info}\nmetadata: {namespace: team-a, name: app}\n",
			obj:         info,
			want:        "kind: ConfigMap\napiVersion: 'v1'\ndata: {\"LOG_LEVEL\": info}\nmetadata: {namespace: team-a, name: app}\n",
			wantChanged: false,
		},
		{
			name: "sees numbers written differently as unchanged",
			content: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: team-a\n" +
				"spec:\n  replicas: 0x3\n  progressDeadlineSeconds: 6.0e+2\n",
			obj: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": "api", "namespace": "team-a"},
				"spec":     map[string]any{"replicas": int64(3), "progressDeadlineSeconds": int64(600)},
			}},
			want: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: team-a\n" +
				"spec:\n  replicas: 0x3\n  progressDeadlineSeconds: 6.0e+2\n",
			wantChanged: false,
		},
		{
			name:        "rewrites a YAML 1.1 boolean that should be the string yes",
			content:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata:\n  enabled: yes\n",
			obj:         appObject(map[string]any{"enabled": "yes"}),
			want:        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata:\n  enabled: \"yes\"\n",
			wantChanged: true,
		},
		{
			name:        "adds a line break before appending to a file without a final one",
			content:     "apiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  namespace: team-a",
			obj:         info,
			want:        "apiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  namespace: team-a\n---\n" + mustEncode(t, info),
			wantChanged: true,
		},
		{
			name:        "appends after a file holding only comments",
			content:     "# objects of team A\n",
			obj:         info,
			want:        "# objects of team A\n---\n" + mustEncode(t, info),
			wantChanged: true,
		},
		{
			name:        "writes just the document into a whitespace-only file",
			content:     "\n  \n",
			obj:         info,
			want:        mustEncode(t, info),
			wantChanged: true,
		},
		{
			name:        "keeps CRLF line endings in a CRLF file",
			content:     "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: app\r\n  namespace: team-a\r\ndata:\r\n  LOG_LEVEL: debug\r\n---\r\n" + "apiVersion: v1\r\nkind: Secret\r\nmetadata:\r\n  name: db\r\n",
			obj:         info,
			want:        "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: app\r\n  namespace: team-a\r\ndata:\r\n  LOG_LEVEL: info\r\n---\r\n" + "apiVersion: v1\r\nkind: Secret\r\nmetadata:\r\n  name: db\r\n",
			wantChanged: true,
		},
		{
			name:        "writes a plain separator when the content started on the separator line",
			content:     "--- !!map\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\n---\n" + deploymentAPI,
			obj:         info,
			want:        "---\n" + mustEncode(t, info) + "---\n" + deploymentAPI,
			wantChanged: true,
		},
		{
			name: "adds a key after a block scalar whose last line looks like a comment",
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata:\n  script: |\n    echo hi\n" +
				"    # part of the script\n",
			obj: appObject(map[string]any{"LOG_LEVEL": "info", "script": "echo hi\n# part of the script\n"}),
			want: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata:\n  script: |\n    echo hi\n" +
				"    # part of the script\n  LOG_LEVEL: info\n",
			wantChanged: true,
		},
		{
			name:        "keeps a comment after the document that cannot change its meaning",
			content:     configMapApp + "# see runbook\n\n---\n" + deploymentAPI,
			obj:         info,
			want:        mustEncode(t, info) + "# see runbook\n\n---\n" + deploymentAPI,
			wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := manifest.Upsert([]byte(tt.content), tt.obj)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.wantChanged, changed)
		})
	}
}

func TestUpsertRefuses(t *testing.T) {
	tests := []struct {
		name    string
		content string
		obj     *unstructured.Unstructured
		wantErr error
		errSays string
	}{
		{name: "refuses a nil object", content: "", obj: nil, wantErr: manifest.ErrInvalidObject},
		{name: "refuses an object without a name", content: "", obj: &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}, wantErr: manifest.ErrInvalidObject, errSays: "has no metadata.name"},
		{name: "refuses an object without a kind", content: "", obj: &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "x"}}}, wantErr: manifest.ErrInvalidObject, errSays: "has no kind"},
		{name: "refuses to edit a file that does not parse", content: "a: [", obj: appObject(nil), wantErr: manifest.ErrUnparseable, errSays: "document 1"},
		{name: "refuses to edit a document using an anchor, naming it", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata: &d\n  LOG_LEVEL: debug\n", obj: appObject(map[string]any{"LOG_LEVEL": "info"}), wantErr: manifest.ErrUnsupportedDocument, errSays: "document 1 (line 1): anchor (line 6, column 7)"},
		{name: "refuses to edit a file whose other document uses a custom tag", content: deploymentAPI + "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  a: !sops x\n", obj: appObject(map[string]any{"LOG_LEVEL": "info"}), wantErr: manifest.ErrUnsupportedDocument, errSays: "document 2 (line 8): custom tag (line 14, column 6)"},
		{name: "refuses to pick one of two documents with the same identity", content: configMapApp + "---\n" + configMapApp, obj: appObject(map[string]any{"LOG_LEVEL": "info"}), wantErr: manifest.ErrDuplicateIdentity, errSays: "ConfigMap team-a/app is defined by documents 1 and 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := manifest.Upsert([]byte(tt.content), tt.obj)
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.errSays)
			assert.Nil(t, out)
			assert.False(t, changed)
		})
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name      string
		content   string
		id        manifest.Identity
		want      string
		wantEmpty bool
	}{
		{
			name:    "removes the middle document and one separator",
			content: deploymentAPI + "---\n" + configMapApp + "---\n" + clusterRoleAdmin,
			id:      appID,
			want:    deploymentAPI + "---\n" + clusterRoleAdmin,
		},
		{
			name:    "removes a bare first document and leaves the next one's separator",
			content: configMapApp + "---\n" + deploymentAPI,
			id:      appID,
			want:    "---\n" + deploymentAPI,
		},
		{
			name:    "keeps the file's header comment when its bare first document goes",
			content: "# Team A config, owned by platform\n" + configMapApp + "---\n" + deploymentAPI,
			id:      appID,
			want:    "# Team A config, owned by platform\n---\n" + deploymentAPI,
		},
		{
			name:    "removes the last document with its separator",
			content: configMapApp + "---\n" + deploymentAPI,
			id:      apiID,
			want:    configMapApp,
		},
		{
			name:      "reports empty when only an empty document remains",
			content:   configMapApp + "---\n",
			id:        appID,
			want:      "---\n",
			wantEmpty: true,
		},
		{
			name:      "reports empty when the only document goes",
			content:   configMapApp,
			id:        appID,
			want:      "",
			wantEmpty: true,
		},
		{
			name:    "keeps the end marker a following bare document relies on",
			content: configMapApp + "---\n" + deploymentAPI + "...\n" + clusterRoleAdmin,
			id:      apiID,
			want:    configMapApp + "...\n" + clusterRoleAdmin,
		},
		{
			name:    "drops the end marker when no document before it needs one",
			content: "# header\n---\n" + configMapApp + "...\n" + deploymentAPI,
			id:      appID,
			want:    "# header\n" + deploymentAPI,
		},
		{
			name:    "drops the end marker when the previous document has its own",
			content: clusterRoleAdmin + "...\n" + configMapApp + "...\n" + deploymentAPI,
			id:      appID,
			want:    clusterRoleAdmin + "...\n" + deploymentAPI,
		},
		{
			name:    "keeps a comment set apart above the next separator when the document before it goes",
			content: deploymentAPI + "---\n" + configMapApp + "\n# The admin role, granted by hand\n---\n" + clusterRoleAdmin,
			id:      appID,
			want:    deploymentAPI + "\n# The admin role, granted by hand\n---\n" + clusterRoleAdmin,
		},
		{
			name:    "keeps a comment set apart above the next separator when a bare first document goes",
			content: configMapApp + "\n# The deployment\n---\n" + deploymentAPI,
			id:      appID,
			want:    "# The deployment\n---\n" + deploymentAPI,
		},
		{
			name:    "removes a comment written right under the document it follows",
			content: deploymentAPI + "---\n" + configMapApp + "# LOG_LEVEL: debug\n---\n" + clusterRoleAdmin,
			id:      appID,
			want:    deploymentAPI + "---\n" + clusterRoleAdmin,
		},
		{
			name:    "keeps the end marker a following directive relies on",
			content: deploymentAPI + "---\n" + configMapApp + "...\n%YAML 1.1\n---\n" + clusterRoleAdmin,
			id:      appID,
			want:    deploymentAPI + "...\n%YAML 1.1\n---\n" + clusterRoleAdmin,
		},
		{
			name:    "drops the first document's directive, not the file's header, when the next document brings its own",
			content: "# Team A\n%YAML 1.1\n---\n" + configMapApp + "...\n%YAML 1.1\n---\n" + deploymentAPI,
			id:      appID,
			want:    "# Team A\n%YAML 1.1\n---\n" + deploymentAPI,
		},
		{
			name:    "keeps a comment set apart above the removed document's separator, which may be the previous one's",
			content: clusterRoleAdmin + "\n# verbs: [get]\n---\n" + configMapApp + "# LOG_LEVEL: debug\n\n# The API\n---\n" + deploymentAPI,
			id:      appID,
			want:    clusterRoleAdmin + "\n# verbs: [get]\n\n# The API\n---\n" + deploymentAPI,
		},
		{
			name:    "removes an indented comment set apart at the end of the document with it",
			content: deploymentAPI + "---\n" + configMapApp + "\n  # LOG_LEVEL: debug\n---\n" + clusterRoleAdmin,
			id:      appID,
			want:    deploymentAPI + "---\n" + clusterRoleAdmin,
		},
		{
			name:    "keeps the blank line that set apart the comment it keeps, so the next removal keeps it too",
			content: deploymentAPI + "\n# The admin role\n---\n" + clusterRoleAdmin,
			id:      apiID,
			want:    "# The admin role\n---\n" + clusterRoleAdmin,
		},
		{
			name: "keeps no line that would read as part of a block scalar before it",
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api\n  namespace: team-a\ndata:\n  run.sh: |\n    echo a\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata:\n  run.sh: |\n    echo b\n\n    # part of the script\n---\n" + clusterRoleAdmin,
			id: appID,
			want: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api\n  namespace: team-a\ndata:\n  run.sh: |\n    echo a\n---\n" +
				clusterRoleAdmin,
		},
		{
			name:    "removes the comments after the last document with it",
			content: configMapApp + "---\n" + deploymentAPI + "\n# end of team A\n",
			id:      apiID,
			want:    configMapApp,
		},
		{
			name:    "returns the content unchanged when the object is not there",
			content: configMapApp,
			id:      apiID,
			want:    configMapApp,
		},
		{
			name:      "reports empty for a missing object in a comment-only file",
			content:   "# nothing\n",
			id:        apiID,
			want:      "# nothing\n",
			wantEmpty: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, empty, err := manifest.Remove([]byte(tt.content), tt.id)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.wantEmpty, empty)
		})
	}
}

func TestRemoveRefuses(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr error
	}{
		{name: "refuses to edit a file that does not parse", content: "a: [", wantErr: manifest.ErrUnparseable},
		{name: "refuses to remove from a file holding a document with an alias", content: configMapApp + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n b\n  labels: {app: *n}\n", wantErr: manifest.ErrUnsupportedDocument},
		{name: "refuses to remove one of two documents with the same identity", content: configMapApp + "---\n" + configMapApp, wantErr: manifest.ErrDuplicateIdentity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := manifest.Remove([]byte(tt.content), appID)
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestEncodeRefusesAnInvalidObject(t *testing.T) {
	_, err := manifest.Encode(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "a/b/c", "kind": "X", "metadata": map[string]any{"name": "x"},
	}})
	require.ErrorIs(t, err, manifest.ErrInvalidObject)
	assert.Contains(t, err.Error(), `invalid apiVersion "a/b/c"`)
}

// mustEncode encodes obj or fails the test.
func mustEncode(t *testing.T, obj *unstructured.Unstructured) string {
	t.Helper()
	out, err := manifest.Encode(obj)
	require.NoError(t, err)
	return string(out)
}

func TestUpsertIndexed(t *testing.T) {
	info := appObject(map[string]any{"LOG_LEVEL": "info"})
	tests := []struct {
		name    string
		content string
	}{
		{name: "returns the documents of a new file", content: ""},
		{name: "returns every document of a file after editing one of them", content: deploymentAPI + "---\n" + configMapApp + "---\n" + clusterRoleAdmin},
		{name: "returns the documents of a file the object was appended to", content: deploymentAPI + "---\n# a comment\n"},
		{name: "returns no documents when nothing changed", content: mustEncode(t, info)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited, err := manifest.UpsertIndexed([]byte(tt.content), info, manifest.Style{})
			require.NoError(t, err)
			if !edited.Changed {
				assert.Nil(t, edited.Docs)
				assert.Equal(t, tt.content, string(edited.Content))
				return
			}
			want, err := manifest.Parse(edited.Content)
			require.NoError(t, err)
			assert.Equal(t, want, edited.Docs, "exactly what Parse reads from the result")
		})
	}
}

func TestAFileKeepsItsByteOrderMark(t *testing.T) {
	const bom = "\uFEFF"
	info := appObject(map[string]any{"LOG_LEVEL": "info"})
	flow := bom + "{apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: team-a}, data: {LOG_LEVEL: debug}}\n"
	tests := []struct {
		name, content string
		edit          func(string) ([]byte, error)
	}{
		{name: "when its first document is rewritten whole (a flow-style root)", content: flow,
			edit: func(c string) ([]byte, error) { out, _, err := manifest.Upsert([]byte(c), info); return out, err }},
		{name: "when its first document is edited in place", content: bom + configMapApp,
			edit: func(c string) ([]byte, error) { out, _, err := manifest.Upsert([]byte(c), info); return out, err }},
		{name: "when its first document is removed", content: bom + configMapApp + "---\n" + deploymentAPI,
			edit: func(c string) ([]byte, error) {
				out, _, err := manifest.Remove([]byte(c), manifest.IdentityOf(info))
				return out, err
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.edit(tt.content)
			require.NoError(t, err)
			assert.Equal(t, bom, string(out[:len(bom)]), "%q", out)
			assert.NotContains(t, string(out[len(bom):]), bom)
		})
	}
}
