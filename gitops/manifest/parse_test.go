package manifest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

const configMapApp = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: team-a
data:
  LOG_LEVEL: debug
`

const deploymentAPI = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: team-a
spec:
  replicas: 1
`

const clusterRoleAdmin = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: admin
rules: []
`

var (
	appID   = manifest.Identity{Kind: "ConfigMap", Namespace: "team-a", Name: "app"}
	apiID   = manifest.Identity{Group: "apps", Kind: "Deployment", Namespace: "team-a", Name: "api"}
	adminID = manifest.Identity{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"}
)

func TestIdentityString(t *testing.T) {
	tests := []struct {
		name string
		id   manifest.Identity
		want string
	}{
		{name: "prefixes the group of a grouped kind", id: apiID, want: "apps/Deployment team-a/api"},
		{name: "leaves out the core group", id: appID, want: "ConfigMap team-a/app"},
		{name: "leaves out the namespace of a cluster-scoped object", id: manifest.Identity{Kind: "ClusterRole", Name: "admin"}, want: "ClusterRole admin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.id.String())
		})
	}
}

func TestIdentityOf(t *testing.T) {
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want manifest.Identity
	}{
		{
			name: "takes the group from apiVersion and ignores the version",
			obj: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apps/v1beta2", "kind": "Deployment",
				"metadata": map[string]any{"name": "api", "namespace": "team-a"},
			}},
			want: apiID,
		},
		{
			name: "gives the core group as empty",
			obj: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "app", "namespace": "team-a"},
			}},
			want: appID,
		},
		{name: "gives the zero identity for nil", obj: nil, want: manifest.Identity{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, manifest.IdentityOf(tt.obj))
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []manifest.DocInfo
	}{
		{
			name:    "reports one identity per document with the group parsed from apiVersion",
			content: configMapApp + "---\n" + deploymentAPI + "---\n" + clusterRoleAdmin,
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}, {Index: 1, Identity: apiID}, {Index: 2, Identity: adminID}},
		},
		{
			name:    "returns no documents for an empty file",
			content: "",
			want:    []manifest.DocInfo{},
		},
		{
			name:    "returns no documents for a file holding only comments",
			content: "# nothing here yet\n\n",
			want:    []manifest.DocInfo{},
		},
		{
			name:    "counts an empty document after a trailing separator",
			content: configMapApp + "---\n",
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}, {Index: 1, Empty: true}},
		},
		{
			name:    "treats a document holding only comments as empty",
			content: "---\n# moved to apps.yaml\n---\n" + configMapApp,
			want:    []manifest.DocInfo{{Index: 0, Empty: true}, {Index: 1, Identity: appID}},
		},
		{
			name:    "does not count comments before the first separator as a document",
			content: "# header\n---\n" + configMapApp,
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}},
		},
		{
			name:    "splits on a separator followed by a comment",
			content: configMapApp + "--- # the deployment\n" + deploymentAPI,
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}, {Index: 1, Identity: apiID}},
		},
		{
			name:    "does not split on an indented --- inside a block scalar",
			content: configMapApp + "  notes: |\n    ---\n    still notes\n---\n" + deploymentAPI,
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}, {Index: 1, Identity: apiID}},
		},
		{
			name:    "starts a new document after an end marker without a separator",
			content: configMapApp + "...\n" + deploymentAPI,
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}, {Index: 1, Identity: apiID}},
		},
		{
			name:    "reads CRLF line endings",
			content: "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: app\r\n  namespace: team-a\r\n---\r\n" + "apiVersion: v1\r\nkind: Secret\r\nmetadata:\r\n  name: db\r\n",
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}, {Index: 1, Identity: manifest.Identity{Kind: "Secret", Name: "db"}}},
		},
		{
			name:    "reads flow-style documents",
			content: `{apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: team-a}}`,
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}},
		},
		{
			name:    "skips a byte order mark",
			content: "\uFEFF# header\n---\n" + configMapApp,
			want:    []manifest.DocInfo{{Index: 0, Identity: appID}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := manifest.Parse([]byte(tt.content))
			require.NoError(t, err)
			if len(tt.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tt.want, withoutDigests(got))
		})
	}
}

// withoutDigests zeroes the digests of infos, for tests about identities and positions;
// TestParseDigests is about the digests.
func withoutDigests(infos []manifest.DocInfo) []manifest.DocInfo {
	for i := range infos {
		infos[i].Digest = manifest.Digest{}
	}
	return infos
}

func TestParseDigests(t *testing.T) {
	obj := appObject(map[string]any{"LOG_LEVEL": "info", "port": "80"})
	want, err := manifest.ValueDigest(obj)
	require.NoError(t, err)
	tests := []struct {
		name    string
		content string
		same    bool
	}{
		{name: "a document written by Encode has its object's digest", content: mustEncode(t, obj), same: true},
		{
			name:    "comments, key order, quoting and flow style do not change the digest",
			content: "# app\nkind: ConfigMap\napiVersion: \"v1\"\ndata: {port: '80', LOG_LEVEL: info}  # both\nmetadata:\n  namespace: team-a\n  name: app\n",
			same:    true,
		},
		{name: "a changed value changes the digest", content: mustEncode(t, appObject(map[string]any{"LOG_LEVEL": "debug", "port": "80"}))},
		{name: "a number where the object has a string changes the digest", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-a\ndata:\n  LOG_LEVEL: info\n  port: 80\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos, err := manifest.Parse([]byte(tt.content))
			require.NoError(t, err)
			require.Len(t, infos, 1)
			assert.Equal(t, tt.same, infos[0].Digest == want)
		})
	}
}

func TestParseDigestOfAnEmptyDocumentIsZero(t *testing.T) {
	infos, err := manifest.Parse([]byte(configMapApp + "---\n# only a comment\n"))
	require.NoError(t, err)
	require.Len(t, infos, 2)
	assert.NotEqual(t, manifest.Digest{}, infos[0].Digest)
	assert.True(t, infos[1].Empty)
	assert.Equal(t, manifest.Digest{}, infos[1].Digest)
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name    string
		content string
		errSays string
	}{
		{name: "says which document lacks metadata.name", content: configMapApp + "---\napiVersion: v1\nkind: Secret\nmetadata:\n  namespace: x\n", errSays: "document 2 (line 8): missing metadata.name"},
		{name: "says which document lacks apiVersion", content: "kind: Secret\nmetadata:\n  name: x\n", errSays: "document 1 (line 1): missing apiVersion"},
		{name: "says which document lacks kind", content: "apiVersion: v1\nmetadata:\n  name: x\n", errSays: "missing kind"},
		{name: "refuses a document without metadata", content: "apiVersion: v1\nkind: Secret\n", errSays: "missing metadata.name"},
		{name: "refuses a document that is a list", content: "- a\n- b\n", errSays: "not a mapping but a sequence"},
		{name: "refuses a document that is a scalar", content: "hello\n", errSays: "not a mapping but a string"},
		{name: "refuses YAML that does not parse, giving the parser's reason", content: configMapApp + "---\napiVersion: v1\nkind: [unclosed\n", errSays: "document 2 (line 8): invalid YAML"},
		{name: "gives parser line numbers of the whole file, not of the document", content: configMapApp + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n   bad: indent\n", errSays: "document 2 (line 8): invalid YAML: yaml: line 13:"},
		{name: "refuses a name that is not a string", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 12\n", errSays: "metadata.name is a number, not a string"},
		{name: "refuses a name that YAML 1.1 reads as a boolean", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yes\n", errSays: "metadata.name is a boolean"},
		{name: "refuses an apiVersion with too many slashes", content: "apiVersion: a/b/c\nkind: X\nmetadata:\n  name: x\n", errSays: `invalid apiVersion "a/b/c"`},
		{name: "refuses a namespace that is not a string", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: [x]\n", errSays: "metadata.namespace is a sequence"},
		{name: "refuses metadata that is not a mapping", content: "apiVersion: v1\nkind: ConfigMap\nmetadata: app\n", errSays: "metadata is a string, not a mapping"},
		{name: "refuses a named List, whose items every tool applies one by one", content: "apiVersion: v1\nkind: List\nmetadata:\n  name: team-config\nitems:\n- " +
			"apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: app\n    namespace: team-a\n", errSays: "a List, whose items kubectl, Kustomize and Flux apply one by one"},
		{name: "refuses any kind of List with items", content: "apiVersion: v1\nkind: ConfigMapList\nmetadata:\n  name: all\nitems: []\n", errSays: "a ConfigMapList"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Parse([]byte(tt.content))
			require.ErrorIs(t, err, manifest.ErrUnparseable)
			assert.Contains(t, err.Error(), tt.errSays)
		})
	}
}

func TestParseRefusesWithoutQuotingTheFilesValues(t *testing.T) {
	const head = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\nstringData:\n"
	tests := []struct {
		name, body, errSays string
		is                  error
	}{
		{"a value that does not read as its tag", "  password: !!int TOP`SECRET\n", "cannot decode !!str `…` as a !!int", manifest.ErrUnparseable},
		{"a null key over a value", "  null: TOPSECRET\n", "unsupported map key", manifest.ErrUnparseable},
		{"a null key over a mapping", "  ~: {password: TOPSECRET}\n", "unsupported map key", manifest.ErrUnparseable},
		// An unquoted value starting with "!", "&" or "*" reads as a tag, an anchor or an alias.
		{"a value read as a tag, named by its line only", "  password: !TOPSECRET\n", "custom tag (line 6, column 13)", manifest.ErrUnsupportedDocument},
		{"a value read as an anchor, named by its line only", "  token: &TOPSECRET\n", "anchor (line 6, column 10)", manifest.ErrUnsupportedDocument},
		{"a value read as an alias of no anchor", "  password: *TOPSECRET\n", "unknown anchor '…' referenced", manifest.ErrUnparseable},
		{"a tag of YAML's own types, named", "  a: !!binary aGk=\n", "custom tag !!binary (line 6, column 6)", manifest.ErrUnsupportedDocument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Parse([]byte(head + tt.body))
			require.ErrorIs(t, err, tt.is)
			assert.Contains(t, err.Error(), tt.errSays)
			assert.NotContains(t, err.Error(), "SECRET")
		})
	}
}

func TestHideValues(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"keeps a message without values", "yaml: line 3: mapping values are not allowed in this context", "yaml: line 3: mapping values are not allowed in this context"},
		{"hides a backquoted value", "yaml: cannot decode !!str `TOPSECRET` as a !!int", "yaml: cannot decode !!str `…` as a !!int"},
		{"hides a value holding a backquote whole", "cannot decode !!str `TOP`SECRET` as a !!int", "cannot decode !!str `…` as a !!int"},
		{"hides every value of a list of errors, and what lies between", "line 1: `A` bad\nline 2: `B` bad", "line 1: `…` bad"},
		{"hides what follows a lone backquote", "cannot decode `TOPSECRET", "cannot decode `…"},
		{"cuts a complex key off", `yaml: invalid map key: []interface {}{"password=TOPSECRET"}`, "yaml: invalid map key: a mapping or sequence"},
		{"cuts a converted value off", `unsupported map key of type: %!s(<nil>), key: <nil>, value: "TOPSECRET"`, "unsupported map key of type: %!s(<nil>), key: <nil>"},
		{"hides the name of an unknown anchor, which an unquoted value starting with * is", "yaml: line 6: unknown anchor 'TOPSECRET' referenced", "yaml: line 6: unknown anchor '…' referenced"},
		{"hides an anchor's name holding a quote whole", "yaml: anchor 'TOP'SECRET' value contains itself", "yaml: anchor '…' value contains itself"},
		{"hides what follows an anchor's lone quote", "yaml: unknown anchor 'TOPSECRET", "yaml: unknown anchor '…'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := manifest.HideValues(errors.New(tt.in))
			assert.Equal(t, tt.want, err.Error())
		})
	}
	assert.NoError(t, manifest.HideValues(nil))
	sentinel := errors.New("cannot decode `x`")
	assert.ErrorIs(t, manifest.HideValues(sentinel), sentinel, "errors.Is still sees the library's error")
}

func TestParseRefusesWhatTheEditorCannotOwn(t *testing.T) {
	tests := []struct {
		name    string
		content string
		errSays string
	}{
		{name: "refuses an anchor, naming the document and the line", content: configMapApp + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata: &shared\n  a: b\n", errSays: "document 2 (line 8): anchor (line 13, column 7)"},
		{name: "refuses an alias", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n a\n  labels:\n    app: *n\n", errSays: "anchor (line 4, column 9)"},
		{name: "refuses a merge key", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  <<: {a: b}\n", errSays: "merge key << (line 6)"},
		{name: "refuses a custom tag", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  a: !vault secret/a\n", errSays: "custom tag (line 6, column 6)"},
		{name: "refuses a standard tag that changes the value", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nbinaryData:\n  a: !!binary aGk=\n", errSays: "custom tag !!binary"},
		{name: "refuses duplicate keys", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n", errSays: `duplicate key "name" (lines 4 and 5)`},
		{name: "refuses keys that are duplicates once read as YAML 1.1", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  yes: a\n  \"true\": b\n", errSays: `duplicate key "true" (lines 6 and 7)`},
		{name: "refuses a complex key", content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  ? [a, b]\n  : c\n", errSays: "complex mapping key (line 6)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Parse([]byte(tt.content))
			require.ErrorIs(t, err, manifest.ErrUnsupportedDocument)
			assert.NotErrorIs(t, err, manifest.ErrUnparseable)
			assert.Contains(t, err.Error(), tt.errSays)
		})
	}
}

func TestParseAcceptsCoreTags(t *testing.T) {
	content := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: !!str a\ndata: !!map\n  port: !!str 80\n"
	infos, err := manifest.Parse([]byte(content))
	require.NoError(t, err)
	assert.Equal(t, []manifest.DocInfo{{Index: 0, Identity: manifest.Identity{Kind: "ConfigMap", Name: "a"}}}, withoutDigests(infos))
}

func TestParseRefusesForeignLineBreaks(t *testing.T) {
	tests := []struct {
		name    string
		content string
		errSays string
	}{
		{name: "refuses a lone carriage return", content: "# c\r" + configMapApp, errSays: "line 1: line break other than LF or CRLF (a lone CR)"},
		{name: "refuses a lone carriage return after CRLF lines", content: "a: b\r\nc: d\re: f\n", errSays: "line 2: line break other than LF or CRLF (a lone CR)"},
		{name: "refuses a Unicode line separator", content: configMapApp + "  note: a\u2028b\n", errSays: "line 8: line break other than LF or CRLF (LS)"},
		{name: "refuses a next-line character", content: "# \u0085\n", errSays: "(NEL)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Parse([]byte(tt.content))
			require.ErrorIs(t, err, manifest.ErrUnparseable)
			assert.Contains(t, err.Error(), tt.errSays)
		})
	}
}

func TestParseReadsAListKindWhoseItemsIsNotASequenceAsAnObject(t *testing.T) {
	docs, err := manifest.Parse([]byte("apiVersion: example.com/v1\nkind: AccessList\nmetadata:\n  name: ops\n  namespace: team-a\nitems:\n  admins: [alice]\n"))
	require.NoError(t, err, "kubectl and Kustomize expand only a sequence of items")
	require.Len(t, docs, 1)
	assert.Equal(t, "AccessList", docs[0].Identity.Kind)
}
