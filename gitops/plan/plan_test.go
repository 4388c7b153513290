package plan_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var (
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	deployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	clusterRoles = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

func TestCanonicalPath(t *testing.T) {
	tests := []struct {
		name      string
		folder    string
		gvr       schema.GroupVersionResource
		namespace string
		object    string
		sensitive bool
		want      string
		wantErr   error
		errSays   string
	}{
		{name: "omits the group segment for a core ConfigMap", folder: "live", gvr: configMaps, namespace: "team-a", object: "app", want: "live/team-a/configmaps/app.yaml"},
		{name: "keeps the group segment for an apps Deployment", folder: "live", gvr: deployments, namespace: "team-a", object: "api", want: "live/team-a/apps/deployments/api.yaml"},
		{name: "uses _cluster as the namespace of cluster-scoped objects", folder: "live", gvr: clusterRoles, object: "admin", want: "live/_cluster/rbac.authorization.k8s.io/clusterroles/admin.yaml"},
		{name: "ends sensitive objects in .sops.yaml", folder: "live", gvr: secrets, namespace: "team-a", object: "db", sensitive: true, want: "live/team-a/secrets/db.sops.yaml"},
		{name: "keeps names with dots and colons as they are", folder: "live", gvr: clusterRoles, object: "system:controller:x.y", want: "live/_cluster/rbac.authorization.k8s.io/clusterroles/system:controller:x.y.yaml"},
		{name: "accepts a nested folder", folder: "clusters/prod/live", gvr: configMaps, namespace: "team-a", object: "app", want: "clusters/prod/live/team-a/configmaps/app.yaml"},
		{name: "cleans a folder with a trailing slash", folder: "live/", gvr: configMaps, namespace: "team-a", object: "app", want: "live/team-a/configmaps/app.yaml"},
		{name: "treats an empty folder as the repository root", folder: "", gvr: configMaps, namespace: "team-a", object: "app", want: "team-a/configmaps/app.yaml"},
		{name: "treats a dot folder as the repository root", folder: ".", gvr: configMaps, namespace: "team-a", object: "app", want: "team-a/configmaps/app.yaml"},

		{name: "refuses an empty name, naming the object", folder: "live", gvr: configMaps, namespace: "team-a", object: "", wantErr: plan.ErrUnsafeName, errSays: `configmaps "team-a/": name "" is empty`},
		{name: "refuses a dot-dot name", folder: "live", gvr: configMaps, namespace: "team-a", object: "..", wantErr: plan.ErrUnsafeName, errSays: `name ".." is a relative path element`},
		{name: "refuses a dot name", folder: "live", gvr: configMaps, namespace: "team-a", object: ".", wantErr: plan.ErrUnsafeName, errSays: `name "." is a relative path element`},
		{name: "refuses a name with a slash", folder: "live", gvr: configMaps, namespace: "team-a", object: "../../etc/passwd", wantErr: plan.ErrUnsafeName, errSays: "contains a slash"},
		{name: "refuses a name with a NUL byte", folder: "live", gvr: configMaps, namespace: "team-a", object: "a\x00b", wantErr: plan.ErrUnsafeName, errSays: "contains a NUL byte"},
		{name: "refuses a name with a backslash, which Git refuses in a path", folder: "live", gvr: clusterRoles, object: `CORP\admins`, wantErr: plan.ErrUnsafeName, errSays: "contains a backslash"},
		{name: "refuses a name with a control character, which Git refuses in a path", folder: "live", gvr: clusterRoles, object: "a\tb", wantErr: plan.ErrUnsafeName, errSays: "contains a control character"},
		{name: "refuses git~1, the Git directory's short name on Windows", folder: "live", gvr: clusterRoles, object: "GIT~1", wantErr: plan.ErrUnsafeName, errSays: "short name"},
		{name: "refuses a name whose file Kustomize would read as the folder's Kustomization", folder: "live", gvr: configMaps, namespace: "team-a", object: "Kustomization", wantErr: plan.ErrUnsafeName, errSays: "would be named Kustomization.yaml, which Kustomize and Flux read"},
		{name: "refuses a name whose file no file system holds (over 255 bytes with .yaml)", folder: "live", gvr: configMaps, namespace: "team-a", object: strings.Repeat("a", 251), wantErr: plan.ErrUnsafeName, errSays: "256 bytes long: no common file system holds a name over 255"},
		{name: "writes a name whose file has 255 bytes", folder: "live", gvr: configMaps, namespace: "team-a", object: strings.Repeat("a", 250), want: "live/team-a/configmaps/" + strings.Repeat("a", 250) + ".yaml"},
		{name: "refuses a sensitive name whose .sops.yaml file would be over 255 bytes", folder: "live", gvr: secrets, namespace: "team-a", object: strings.Repeat("s", 246), sensitive: true, wantErr: plan.ErrUnsafeName, errSays: "256 bytes long"},
		{name: "refuses a name whose file sops would read as its rules", folder: "live", gvr: clusterRoles, object: ".sops", wantErr: plan.ErrUnsafeName, errSays: "sops CLI reads"},
		{name: "refuses a name whose file Flux leaves out of its artifacts", folder: "live", gvr: configMaps, namespace: "ci", object: "cloudbuild", wantErr: plan.ErrUnsafeName, errSays: "Flux's source-controller leaves out"},
		{name: "refuses a name whose file Flux leaves out at any depth", folder: "live", gvr: clusterRoles, object: ".flux", wantErr: plan.ErrUnsafeName, errSays: "never be deployed"},
		{name: "writes a sensitive object named cloudbuild, whose .sops.yaml file Flux takes", folder: "live", gvr: secrets, namespace: "ci", object: "cloudbuild", sensitive: true, want: "live/ci/secrets/cloudbuild.sops.yaml"},
		{name: "writes a sensitive object named kustomization to its .sops.yaml file", folder: "live", gvr: secrets, namespace: "team-a", object: "kustomization", sensitive: true, want: "live/team-a/secrets/kustomization.sops.yaml"},
		{name: "refuses a dot-dot namespace", folder: "live", gvr: configMaps, namespace: "..", object: "app", wantErr: plan.ErrUnsafeName, errSays: `namespace ".." is a relative path element`},
		{name: "refuses the reserved _cluster namespace", folder: "live", gvr: configMaps, namespace: "_cluster", object: "app", wantErr: plan.ErrUnsafeName, errSays: "reserved for cluster-scoped objects"},
		{name: "refuses a group with a slash, naming the group", folder: "live", gvr: schema.GroupVersionResource{Group: "a/b", Resource: "things"}, namespace: "team-a", object: "x", wantErr: plan.ErrUnsafeName, errSays: `group "a/b" contains a slash`},
		{name: "refuses an empty resource", folder: "live", gvr: schema.GroupVersionResource{Group: "apps"}, namespace: "team-a", object: "x", wantErr: plan.ErrUnsafeName, errSays: `resource "" is empty`},
		{name: "refuses a .git resource in any letter case", folder: "live", gvr: schema.GroupVersionResource{Resource: ".GIT"}, namespace: "team-a", object: "x", wantErr: plan.ErrUnsafeName, errSays: "Git metadata directory"},
		{name: "names a cluster-scoped object without a namespace", folder: "live", gvr: clusterRoles, object: "..", wantErr: plan.ErrUnsafeName, errSays: `clusterroles.rbac.authorization.k8s.io "..": name`},

		{name: "refuses an absolute folder", folder: "/live", gvr: configMaps, namespace: "team-a", object: "app", wantErr: plan.ErrUnsafeFolder, errSays: "absolute"},
		{name: "refuses a folder that leaves the repository", folder: "live/../../x", gvr: configMaps, namespace: "team-a", object: "app", wantErr: plan.ErrUnsafeFolder, errSays: "leaves the repository"},
		{name: "refuses a folder inside .git", folder: "live/.git/hooks", gvr: configMaps, namespace: "team-a", object: "app", wantErr: plan.ErrUnsafeFolder, errSays: ".git directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plan.CanonicalPath(tt.folder, tt.gvr, tt.namespace, tt.object, tt.sensitive)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), tt.errSays)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.True(t, plan.Within(tt.folder, got), "a planned path must lie inside its folder")
		})
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		name   string
		folder string
		p      string
		want   bool
	}{
		{name: "accepts a file below the folder", folder: "live", p: "live/team-a/configmaps/app.yaml", want: true},
		{name: "accepts a file directly in the folder", folder: "live", p: "live/README.md", want: true},
		{name: "accepts a folder given with a trailing slash", folder: "live/", p: "live/a.yaml", want: true},
		{name: "refuses the folder itself", folder: "live", p: "live", want: false},
		{name: "refuses a sibling sharing the folder's prefix", folder: "live", p: "live2/a.yaml", want: false},
		{name: "refuses a path that climbs out with dot-dot", folder: "live", p: "live/../secret.yaml", want: false},
		{name: "refuses a path that is not clean", folder: "live", p: "live/./a.yaml", want: false},
		{name: "refuses an absolute path", folder: "live", p: "/live/a.yaml", want: false},
		{name: "refuses an empty path", folder: "live", p: "", want: false},
		{name: "refuses a path with a NUL byte", folder: "live", p: "live/a\x00.yaml", want: false},
		{name: "accepts any relative path below the repository root", folder: "", p: "a/b.yaml", want: true},
		{name: "refuses the repository root itself", folder: ".", p: ".", want: false},
		{name: "refuses a path above the repository root", folder: "", p: "../a.yaml", want: false},
		{name: "refuses everything for an unsafe folder", folder: "../live", p: "../live/a.yaml", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, plan.Within(tt.folder, tt.p))
		})
	}
}

// TestCanonicalPathGolden pins the layout of a realistic mix of objects, so a
// change in the path scheme shows up as one reviewable diff.
func TestCanonicalPathGolden(t *testing.T) {
	objects := []struct {
		gvr       schema.GroupVersionResource
		namespace string
		name      string
		sensitive bool
	}{
		{configMaps, "team-a", "app", false},
		{secrets, "team-a", "db", true},
		{deployments, "team-a", "api", false},
		{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "team-a", false},
		{clusterRoles, "", "admin", false},
		{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "", "fast", false},
		{schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "", "widgets.example.com", false},
		{schema.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "widgets"}, "team-b", "w1", false},
	}
	var b strings.Builder
	for _, o := range objects {
		p, err := plan.CanonicalPath("live", o.gvr, o.namespace, o.name, o.sensitive)
		require.NoError(t, err)
		resource := o.gvr.GroupResource().String()
		object := o.name
		if o.namespace != "" {
			object = o.namespace + "/" + o.name
		}
		if o.sensitive {
			object += " (sensitive)"
		}
		fmt.Fprintf(&b, "%s %s\n  -> %s\n", resource, object, p)
	}
	golden := filepath.Join("testdata", "canonical_paths.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), b.String())
}
