package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// roundTrip is one hand-written manifest (testdata/roundtrip/<file>), the file the
// operator writes it to, and one edit made to it the way `kubectl edit` would: a patch,
// and the one line of the file it must change.
type roundTrip struct {
	file      string
	path      string
	resource  string
	patchType string
	patch     string
	from, to  string
}

func roundTrips() []roundTrip {
	const ns, cluster = "live/roundtrip/", "live/_cluster/"
	return []roundTrip{
		{"customresourcedefinition.yaml", cluster + "apiextensions.k8s.io/customresourcedefinitions/widgets.roundtrip.example.com.yaml",
			"customresourcedefinition/widgets.roundtrip.example.com", "json",
			`[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/type","value":"number"}]`,
			"                type: integer", "                type: number"},
		{"widget.yaml", ns + "roundtrip.example.com/widgets/blue.yaml", "widget/blue", "merge",
			`{"spec":{"size":4}}`, "  size: 3", "  size: 4"},
		{"deployment.yaml", ns + "apps/deployments/web.yaml", "deployment/web", "merge",
			`{"spec":{"replicas":3}}`, "  replicas: 2", "  replicas: 3"},
		{"statefulset.yaml", ns + "apps/statefulsets/db.yaml", "statefulset/db", "strategic",
			`{"spec":{"template":{"spec":{"containers":[{"name":"db","image":"postgres:17.2"}]}}}}`,
			"        image: postgres:17", "        image: postgres:17.2"},
		{"daemonset.yaml", ns + "apps/daemonsets/agent.yaml", "daemonset/agent", "strategic",
			`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"busybox:1.37.0"}]}}}}`,
			"        image: busybox:1.37", "        image: busybox:1.37.0"},
		{"cronjob.yaml", ns + "batch/cronjobs/report.yaml", "cronjob/report", "merge",
			`{"spec":{"schedule":"0 4 * * *"}}`, "  schedule: 0 3 * * *", "  schedule: 0 4 * * *"},
		{"service.yaml", ns + "services/web.yaml", "service/web", "strategic",
			`{"spec":{"ports":[{"port":80,"targetPort":9090}]}}`, "    targetPort: 8080", "    targetPort: 9090"},
		{"ingress.yaml", ns + "networking.k8s.io/ingresses/web.yaml", "ingress/web", "merge",
			`{"metadata":{"annotations":{"example.com/owner":"team-api"}}}`,
			"    example.com/owner: team-web", "    example.com/owner: team-api"},
		{"networkpolicy.yaml", ns + "networking.k8s.io/networkpolicies/web.yaml", "networkpolicy/web", "merge",
			`{"spec":{"podSelector":{"matchLabels":{"app":"api"}}}}`, "      app: web", "      app: api"},
		{"serviceaccount.yaml", ns + "serviceaccounts/builder.yaml", "serviceaccount/builder", "merge",
			`{"imagePullSecrets":[{"name":"registry-2"}]}`, "- name: registry", "- name: registry-2"},
		{"storageclass.yaml", cluster + "storage.k8s.io/storageclasses/roundtrip-fast.yaml", "storageclass/roundtrip-fast", "merge",
			`{"allowVolumeExpansion":false}`, "allowVolumeExpansion: true", "allowVolumeExpansion: false"},
		{"priorityclass.yaml", cluster + "scheduling.k8s.io/priorityclasses/roundtrip-important.yaml", "priorityclass/roundtrip-important", "merge",
			`{"description":"For workloads that must run."}`,
			"description: For workloads that must keep running.", "description: For workloads that must run."},
		{"clusterrole.yaml", cluster + "rbac.authorization.k8s.io/clusterroles/roundtrip-view.yaml", "clusterrole/roundtrip-view", "merge",
			`{"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"roundtrip.example.com/aggregate-to-view":"false"}}]}}`,
			`      roundtrip.example.com/aggregate-to-view: "true"`, `      roundtrip.example.com/aggregate-to-view: "false"`},
		{"rolebinding.yaml", ns + "rbac.authorization.k8s.io/rolebindings/builders.yaml", "rolebinding/builders", "merge",
			`{"subjects":[{"kind":"ServiceAccount","name":"deployer","namespace":"roundtrip"}]}`, "- name: builder", "- name: deployer"},
		{"configmap.yaml", ns + "configmaps/settings.yaml", "configmap/settings", "merge",
			`{"metadata":{"annotations":{"example.com/reviewed-by":"bob"}}}`,
			"    example.com/reviewed-by: alice", "    example.com/reviewed-by: bob"},
		{"persistentvolumeclaim.yaml", ns + "persistentvolumeclaims/data.yaml", "persistentvolumeclaim/data", "merge",
			`{"metadata":{"annotations":{"example.com/backup":"hourly"}}}`,
			"    example.com/backup: daily", "    example.com/backup: hourly"},
	}
}

func readRoundTrip(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "roundtrip", file))
	require.NoError(t, err)
	return string(raw)
}

// The hand-written manifests are in the writer's order for new documents; a failure here
// names the manifest to reorder before the round trip can mean anything.
func TestRoundTripManifestsAreInTheWritersOrder(t *testing.T) {
	for _, rt := range roundTrips() {
		want := readRoundTrip(t, rt.file)
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(want), &obj), rt.file)
		got, err := manifest.Encode(&unstructured.Unstructured{Object: obj})
		require.NoError(t, err, rt.file)
		assert.Equal(t, want, string(got), rt.file)
		assert.Equal(t, 1, strings.Count(want, rt.from+"\n"), "%s: the edited line must be unique", rt.file)
	}
}

// Sixteen kinds applied with `kubectl apply --server-side` from clean hand-written
// manifests come back from Git byte for byte (nothing the server defaulted is added), and
// an edit of one field changes exactly that one line of each file. Each is created under
// the user who applied it: the object the watch shows has the content admission saw, for
// every kind (a Service's allocated addresses, defaults, a custom resource).
func TestRoundTripOfSixteenKinds(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "roundtrip", remote, "live", "1s")
	cases := roundTrips()
	kubectl(t, readRoundTrip(t, cases[0].file), "apply", "--server-side", "-f", "-")
	kubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", cases[0].resource)
	watchRoundTripKinds(t)
	for _, rt := range cases[1:] {
		kubectl(t, readRoundTrip(t, rt.file), as("erin", "apply", "--server-side", "-f", "-")...)
	}

	for _, rt := range cases {
		want := readRoundTrip(t, rt.file)
		got := waitFile(t, remote, rt.path, func(string) bool { return true })
		assert.Equal(t, want, got, "%s is written as it was applied", rt.file)
	}
	for _, rt := range cases[1:] { // the CRD was there before the rules: listed, the committer's
		authors := strings.Fields(git(t, remote, "log", "--reverse", "--format=%an", "main", "--", rt.path))
		assert.Equal(t, []string{"erin"}, authors, "%s is created under the user who applied it", rt.file)
	}
	if t.Failed() {
		return
	}
	time.Sleep(2 * time.Second) // let the quiet window pass
	before := strings.TrimSpace(git(t, remote, "rev-parse", "main"))

	for _, rt := range cases {
		kubectl(t, "", "-n", "roundtrip", "patch", rt.resource, "--type="+rt.patchType, "-p", rt.patch)
	}
	var paths []string
	for _, rt := range cases {
		edited := strings.Replace(readRoundTrip(t, rt.file), rt.from+"\n", rt.to+"\n", 1)
		got := waitFile(t, remote, rt.path, func(c string) bool { return strings.Contains(c, rt.to+"\n") })
		assert.Equal(t, edited, got, "%s: only the edited line changes", rt.file)
		paths = append(paths, rt.path)
	}
	assertOneLineEach(t, remote, before, paths)
	fsck(t, remote)
}

// assertOneLineEach asserts that main differs from before by exactly one changed line in
// each of paths and nowhere else.
func assertOneLineEach(t *testing.T, remote, before string, paths []string) {
	t.Helper()
	var want []string
	for _, path := range paths {
		want = append(want, fmt.Sprintf("1\t1\t%s", path))
	}
	sort.Strings(want)
	diff := strings.Split(strings.TrimSpace(git(t, remote, "diff", "--numstat", before, "main")), "\n")
	sort.Strings(diff)
	assert.Equal(t, want, diff, "every edit is exactly one line")
}

// The default-heavy kinds applied with client-side `kubectl apply` come back from Git byte
// for byte: the kubectl-client-side-apply manager claims every default the server filled
// in, but only what the last-applied configuration has counts. Applying an edited
// manifest the same way changes exactly the edited line.
func TestRoundTripOfClientSideApply(t *testing.T) {
	const ns = "roundtrip-csa"
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, ns, remote, "live", "1s")
	watchClientSideApplyKinds(t, ns)
	cases := clientSideApplyRoundTrips(ns)
	for _, rt := range cases {
		kubectl(t, rt.manifest, "apply", "-f", "-")
	}
	for _, rt := range cases {
		got := waitFile(t, remote, rt.path, func(string) bool { return true })
		assert.Equal(t, rt.manifest, got, "%s is written as it was applied", rt.file)
	}
	if t.Failed() {
		return
	}
	time.Sleep(2 * time.Second) // let the quiet window pass
	before := strings.TrimSpace(git(t, remote, "rev-parse", "main"))

	var paths []string
	for _, rt := range cases {
		edited := strings.Replace(rt.manifest, rt.from+"\n", rt.to+"\n", 1)
		kubectl(t, edited, "apply", "-f", "-")
		got := waitFile(t, remote, rt.path, func(c string) bool { return strings.Contains(c, rt.to+"\n") })
		assert.Equal(t, edited, got, "%s: only the edited line changes", rt.file)
		paths = append(paths, rt.path)
	}
	assertOneLineEach(t, remote, before, paths)
	fsck(t, remote)
}

// clientSideApplyRound is a round trip (path moved into another namespace) with its
// manifest moved there too.
type clientSideApplyRound struct {
	roundTrip
	manifest string
}

// clientSideApplyRoundTrips returns the Deployment, Service and CronJob round trips,
// moved into namespace ns so they do not meet the server-side ones.
func clientSideApplyRoundTrips(ns string) []clientSideApplyRound {
	kinds := map[string]bool{"deployment.yaml": true, "service.yaml": true, "cronjob.yaml": true}
	var out []clientSideApplyRound
	for _, rt := range roundTrips() {
		if !kinds[rt.file] {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("testdata", "roundtrip", rt.file))
		if err != nil {
			continue // TestRoundTripManifestsAreInTheWritersOrder names the missing file
		}
		rt.path = strings.Replace(rt.path, "live/roundtrip/", "live/"+ns+"/", 1)
		manifest := strings.Replace(string(raw), "  namespace: roundtrip\n", "  namespace: "+ns+"\n", 1)
		out = append(out, clientSideApplyRound{roundTrip: rt, manifest: manifest})
	}
	return out
}

// watchClientSideApplyKinds claims Deployments, Services and CronJobs in ns.
func watchClientSideApplyKinds(t *testing.T, ns string) {
	t.Helper()
	kubectl(t, fmt.Sprintf(`apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: csa
  namespace: %s
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: [""]
    resources: [services]
  - apiGroups: [apps]
    resources: [deployments]
  - apiGroups: [batch]
    resources: [cronjobs]
`, ns), "apply", "-f", "-")
	kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "watchrule/csa")
}

// watchRoundTripKinds claims the round-trip kinds: namespaced ones with a WatchRule, the
// cluster-scoped ones with a ClusterWatchRule selecting only this test's objects.
func watchRoundTripKinds(t *testing.T) {
	t.Helper()
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: roundtrip
  namespace: roundtrip
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: [""]
    resources: [services, serviceaccounts, configmaps, persistentvolumeclaims]
  - apiGroups: [apps]
    resources: [deployments, statefulsets, daemonsets]
  - apiGroups: [batch]
    resources: [cronjobs]
  - apiGroups: [networking.k8s.io]
    resources: [ingresses, networkpolicies]
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [rolebindings]
  - apiGroups: [roundtrip.example.com]
    resources: [widgets]
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: ClusterWatchRule
metadata:
  name: roundtrip
spec:
  targetRef:
    namespace: roundtrip
    name: live
  rules:
  - apiGroups: [storage.k8s.io]
    resources: [storageclasses]
    objectSelector:
      matchLabels:
        e2e: roundtrip
  - apiGroups: [scheduling.k8s.io]
    resources: [priorityclasses]
    objectSelector:
      matchLabels:
        e2e: roundtrip
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [clusterroles]
    objectSelector:
      matchLabels:
        e2e: roundtrip
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    objectSelector:
      matchLabels:
        e2e: roundtrip
`, "apply", "-f", "-")
	kubectl(t, "", "-n", "roundtrip", "wait", "--for=condition=Ready", "--timeout=60s", "watchrule/roundtrip")
	kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=60s", "clusterwatchrule/roundtrip")
}

// A file that already holds server defaults (written by hand, or before they were left
// out) keeps them: nobody owns them, but Git has them. An edit changes only its line.
func TestDefaultsAlreadyInGitStay(t *testing.T) {
	remote := newRemote(t)
	inGit := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: kept
  namespace: roundtrip-git
spec:
  replicas: 1
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: kept
  template:
    metadata:
      labels:
        app: kept
    spec:
      containers:
      - name: app
        image: nginx:1.27
        imagePullPolicy: IfNotPresent
      dnsPolicy: ClusterFirst
`
	seedFile(t, remote, "live/deploy.yaml", inGit)
	before := strings.TrimSpace(git(t, remote, "rev-parse", "main"))
	applied := strings.NewReplacer("  revisionHistoryLimit: 10\n", "", "        imagePullPolicy: IfNotPresent\n", "",
		"      dnsPolicy: ClusterFirst\n", "").Replace(inGit)
	kubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: roundtrip-git\n", "apply", "-f", "-")
	kubectl(t, applied, "apply", "--server-side", "-f", "-")

	startOperator(t, t.TempDir())
	setupTarget(t, "roundtrip-git", remote, "live", "0s")
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: deployments
  namespace: roundtrip-git
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: [apps]
    resources: [deployments]
`, "apply", "-f", "-")
	kubectl(t, "", "-n", "roundtrip-git", "wait", "--for=condition=Ready", "--timeout=60s", "watchrule/deployments", "gittarget/live")

	kubectl(t, "", "-n", "roundtrip-git", "patch", "deployment", "kept", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	got := waitFile(t, remote, "live/deploy.yaml", func(c string) bool { return strings.Contains(c, "replicas: 2\n") })
	assert.Equal(t, strings.Replace(inGit, "replicas: 1\n", "replicas: 2\n", 1), got)
	diff := git(t, remote, "diff", "--numstat", before, "main")
	assert.Equal(t, "1\t1\tlive/deploy.yaml", strings.TrimSpace(diff), "the defaults in Git stay; only the edit changes")
	fsck(t, remote)
}
