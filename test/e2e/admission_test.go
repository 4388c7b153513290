package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func watchRule(t *testing.T, ns, name, resources string) string {
	t.Helper()
	out := kubectl(t, fmt.Sprintf(`apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: %s
  namespace: %s
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: [""]
    resources: [%s]
`, name, ns, resources), "apply", "-f", "-")
	kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "watchrule/"+name)
	return out
}

// webhookRules returns the resources of the watched-objects webhook's rules.
func webhookRules(t *testing.T) string {
	t.Helper()
	return kubectl(t, "", "get", "validatingwebhookconfiguration", webhookConfigName, "-o",
		`jsonpath={.webhooks[?(@.name=="watched.reverser.gitops.dev")].rules[*].resources}`)
}

// waitDenied retries an apply until the webhook (whose rules the operator syncs within
// seconds) denies it, and returns the error output.
func waitDenied(t *testing.T, manifest string, args ...string) string {
	t.Helper()
	var out string
	eventually(t, 30*time.Second, "denial", func() (bool, string) {
		o, err := kubectlErr(manifest, args...)
		out = o
		return err != nil && strings.Contains(o, "denied the request"), o
	})
	return out
}

const secretManifest = `apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: %s
stringData:
  password: hunter2
`

func TestSecretWithoutEncryptionIsDeniedAtApplyAndDryRun(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "sec-a", remote, "live", "0s")
	out := watchRule(t, "sec-a", "all", `"configmaps", "secrets"`)
	assert.Contains(t, out, "Warning: WatchRule sec-a/all routes secrets to GitTarget sec-a/live, which cannot encrypt (it has no spec.encryption)",
		"the rule is told at once, not at the first Secret")

	manifest := fmt.Sprintf(secretManifest, "sec-a")
	out = waitDenied(t, manifest, "apply", "--dry-run=server", "-f", "-")
	assert.Contains(t, out, "Secret sec-a/db would be stored in plaintext")
	assert.Contains(t, out, "GitTarget sec-a/live")
	assert.NotContains(t, out, "hunter2")

	out, err := kubectlErr(manifest, "apply", "-f", "-")
	require.Error(t, err)
	assert.Contains(t, out, "would be stored in plaintext")
	_, err = kubectlErr("", "-n", "sec-a", "get", "secret", "db")
	assert.Error(t, err, "a denied Secret must not be stored")

	// A Secret holding an age private key is never written to Git, so admission has nothing
	// to judge: it is allowed, and a dry run says why.
	private, _, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	keys := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: sops-age\n  namespace: sec-a\nstringData:\n  age.agekey: %s\n", private)
	out, err = kubectlErr(keys, "apply", "--dry-run=server", "-f", "-")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Secret sec-a/sops-age holds key material")
	assert.NotContains(t, out, private)
	kubectl(t, keys, "apply", "-f", "-")
	kubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after\n  namespace: sec-a\n", "apply", "-f", "-")
	waitFile(t, remote, "live/sec-a/configmaps/after.yaml", func(string) bool { return true })
	assert.NotContains(t, strings.Join(folderFiles(remote, "live"), "\n"), "sops-age", "key material never reaches Git")
}

func TestARelabelThatWouldSendANamespacesSecretsToATargetThatCannotEncryptIsDenied(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "relabel-a", remote, "live", "0s")
	rule := func(resources string) string {
		return fmt.Sprintf(`apiVersion: reverser.gitops.dev/v1alpha1
kind: ClusterWatchRule
metadata:
  name: e2e-relabel
spec:
  targetRef:
    namespace: relabel-a
    name: live
  rules:
  - apiGroups: [""]
    resources: [%s]
    namespaceSelector:
      matchLabels:
        mirror: "on"
`, resources)
	}
	kubectl(t, rule(`"configmaps", "secrets"`), "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = kubectlErr("", "delete", "clusterwatchrule/e2e-relabel", "namespace/relabel-b", "--ignore-not-found", "--wait=false")
	})
	kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=60s", "clusterwatchrule/e2e-relabel")
	// A tenant operator's namespace: its controller ownerReference makes its own writes
	// noise, not the objects in it, which its labels move all the same.
	kubectl(t, `apiVersion: v1
kind: Namespace
metadata:
  name: relabel-b
  ownerReferences:
  - apiVersion: tenants.example.com/v1
    kind: Tenant
    name: b
    uid: 6b1c7d3e-0000-4000-8000-0000000000b0
    controller: true
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: relabel-b
data:
  k: v
`, "apply", "-f", "-")

	// The label would bring every Secret of relabel-b to a target that cannot encrypt: each
	// would be denied when written, so the label is, on a dry run and for real.
	out := waitDenied(t, "", "label", "namespace", "relabel-b", "mirror=on", "--dry-run=server")
	assert.Contains(t, out, "Namespace relabel-b cannot be relabelled: its new labels bring its objects of secrets into the rules of GitTarget relabel-a/live")
	assert.Contains(t, out, "would be stored in plaintext")
	out, err := kubectlErr("", "label", "namespace", "relabel-b", "mirror=on")
	require.Error(t, err, out)
	assert.Contains(t, out, "cannot be relabelled")
	// A label no selector reads moves nothing, nor does an annotation.
	kubectl(t, "", "label", "namespace", "relabel-b", "team=b")
	kubectl(t, "", "annotate", "namespace", "relabel-b", "example.com/owner=b")

	// A rule of ConfigMaps only takes the label, and the namespace's objects arrive in Git.
	kubectl(t, rule(`"configmaps"`), "apply", "-f", "-")
	eventually(t, 30*time.Second, "the label allowed", func() (bool, string) {
		o, err := kubectlErr("", "label", "namespace", "relabel-b", "mirror=on")
		return err == nil, o
	})
	waitFile(t, remote, "live/relabel-b/configmaps/app.yaml", func(c string) bool { return strings.Contains(c, "k: v") })
}

func TestUnsupportedFolderDeniesUntilFixedInGit(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "fold-a", remote, "live", "0s")
	watchRule(t, "fold-a", "cms", `"configmaps"`)
	steady := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: steady\n  namespace: fold-a\ndata:\n  k: v\n"
	kubectl(t, steady, "apply", "--server-side", "-f", "-")
	waitFile(t, remote, "live/fold-a/configmaps/steady.yaml", func(c string) bool { return strings.Contains(c, "k: v") })

	// A person pushes a script into the folder.
	seed := t.TempDir()
	for _, args := range [][]string{{"clone", remote, "."}} {
		out, err := execGit(seed, args...)
		require.NoError(t, err, out)
	}
	require.NoError(t, writeFile(seed+"/live/tools/run.sh", "#!/bin/sh\n"))
	for _, args := range [][]string{{"add", "."}, {"-c", "user.name=H", "-c", "user.email=h@x", "commit", "-m", "script"}, {"push", "origin", "HEAD:main"}} {
		out, err := execGit(seed, args...)
		require.NoError(t, err, out)
	}
	kubectl(t, "", "-n", "fold-a", "wait", "--for=condition=Stalled", "--timeout=60s", "gittarget/live")

	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: fold-a\ndata:\n  k: v\n"
	out := waitDenied(t, cm, "apply", "-f", "-")
	assert.Contains(t, out, "live/tools/run.sh")
	assert.Contains(t, out, "GitTarget fold-a/live")
	// A pipeline re-applying what the cluster already has is not stopped: nothing is stored.
	out, err := kubectlErr(steady, "apply", "--server-side", "-f", "-")
	require.NoError(t, err, "an apply that changes nothing is allowed while the target is Stalled: %s", out)
	out = waitDenied(t, strings.Replace(steady, "k: v", "k: changed", 1), "apply", "--server-side", "-f", "-")
	assert.Contains(t, out, "live/tools/run.sh")
	// Nor is a write of a field only the cluster's controllers own, which the writer leaves
	// out of Git (the API server records the field manager before the webhook is called);
	// the same annotation made by a person is denied.
	out, err = kubectlErr("", "-n", "fold-a", "annotate", "configmap", "steady", "--field-manager=kube-controller-manager", "example.com/bound=yes")
	require.NoError(t, err, "a controller's own field is allowed while the target is Stalled: %s", out)
	out, err = kubectlErr("", "-n", "fold-a", "annotate", "configmap", "steady", "example.com/owner=alice")
	require.Error(t, err, out)
	assert.Contains(t, out, "live/tools/run.sh")

	// The cluster's own controllers are never blocked: an object with a controller
	// ownerReference is not judged (and not captured).
	owned := `apiVersion: v1
kind: ConfigMap
metadata:
  name: owned
  namespace: fold-a
  ownerReferences:
  - apiVersion: apps/v1
    kind: Deployment
    name: api
    uid: 6b1c7d3e-0000-4000-8000-000000000001
    controller: true
data:
  k: v
`
	out, err = kubectlErr(owned, "apply", "-f", "-")
	require.NoError(t, err, out)
	// Nor is any other write of kube-controller-manager's controllers (the default
	// ServiceAccount of a new namespace, a StatefulSet's claims): a controller cannot fix the
	// folder. The change is held, and written once the folder is fixed, below.
	out, err = kubectlErr("", "--as=system:serviceaccount:kube-system:root-ca-cert-publisher", "-n", "fold-a", "create", "configmap", "published", "--from-literal=k=v")
	require.NoError(t, err, "a cluster controller's creation is allowed while the target is Stalled: %s", out)

	// The person removes the script; the same apply succeeds without a restart.
	for _, args := range [][]string{{"rm", "-q", "live/tools/run.sh"}, {"-c", "user.name=H", "-c", "user.email=h@x", "commit", "-m", "rm"}, {"push", "origin", "HEAD:main"}} {
		out, err := execGit(seed, args...)
		require.NoError(t, err, out)
	}
	eventually(t, 30*time.Second, "apply allowed", func() (bool, string) {
		o, err := kubectlErr(cm, "apply", "-f", "-")
		return err == nil, o
	})
	waitFile(t, remote, "live/fold-a/configmaps/app.yaml", func(c string) bool { return strings.Contains(c, "k: v") })
	waitFile(t, remote, "live/fold-a/configmaps/published.yaml", func(c string) bool { return strings.Contains(c, "k: v") })

	// An overlay beside the folder starts listing that file: the writer would break its
	// build by renaming or removing it, so changes are denied again, naming the overlay.
	pulled, err := execGit(seed, "pull", "-q", "origin", "main")
	require.NoError(t, err, pulled)
	require.NoError(t, writeFile(seed+"/overlays/prod/kustomization.yaml", "resources:\n- ../../live/fold-a/configmaps/app.yaml\n"))
	for _, args := range [][]string{{"add", "."}, {"-c", "user.name=H", "-c", "user.email=h@x", "commit", "-m", "overlay"}, {"push", "origin", "HEAD:main"}} {
		out, err := execGit(seed, args...)
		require.NoError(t, err, out)
	}
	out = waitDenied(t, strings.Replace(cm, "k: v", "k: w", 1), "apply", "--dry-run=server", "-f", "-")
	assert.Contains(t, out, "overlays/prod/kustomization.yaml is a Kustomize file outside the folder that refers to ../../live/fold-a/configmaps/app.yaml")
}

func TestAllowedDryRunWarnsWhereTheObjectLands(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "warn-a", remote, "live", "0s")
	watchRule(t, "warn-a", "cms", `"configmaps"`)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: warn-a\ndata:\n  k: v\n"
	want := fmt.Sprintf("%s main:live/warn-a/configmaps/app.yaml", remoteURL(t, remote))
	eventually(t, 30*time.Second, "dry-run warning", func() (bool, string) {
		o, err := kubectlErr(cm, "apply", "--dry-run=server", "-f", "-")
		return err == nil && strings.Contains(o, want), o
	})
	_, err := kubectlErr("", "-n", "warn-a", "get", "configmap", "app")
	assert.Error(t, err, "dry-run stores nothing")
}

func TestWebhookRulesFollowWatchRulesAndSkipUnwatched(t *testing.T) {
	remote := newRemote(t)
	metricsPort, err := freePort()
	require.NoError(t, err)
	startOperator(t, t.TempDir(), "--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(metricsPort))
	setupTarget(t, "rules-a", remote, "live", "0s")

	watchRule(t, "rules-a", "svc", `"services"`)
	eventually(t, 30*time.Second, "services in webhook rules", func() (bool, string) {
		r := webhookRules(t)
		return strings.Contains(r, "services"), r
	})
	before := verdicts(t, metricsPort)
	// Unwatched type in a watched namespace, and a watched type in an excluded namespace.
	kubectl(t, "", "-n", "rules-a", "create", "serviceaccount", "unwatched", "--dry-run=server")
	kubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gitops-reverser-system\n", "apply", "-f", "-")
	kubectl(t, "", "-n", "gitops-reverser-system", "create", "service", "clusterip", "excluded", "--tcp=80:80", "--dry-run=server")
	kubectl(t, "", "-n", "kube-system", "create", "service", "clusterip", "excluded", "--tcp=80:80", "--dry-run=server")
	assert.Equal(t, before, verdicts(t, metricsPort), "unwatched objects and excluded namespaces never reach the webhook")
	kubectl(t, "", "-n", "rules-a", "create", "service", "clusterip", "watched", "--tcp=80:80", "--dry-run=server")
	assert.Equal(t, before+1, verdicts(t, metricsPort), "a watched object reaches the webhook")
	kubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: rules-elsewhere\n", "apply", "-f", "-")
	kubectl(t, "", "-n", "rules-elsewhere", "create", "service", "clusterip", "unwatched", "--tcp=80:80", "--dry-run=server")
	assert.Equal(t, before+1, verdicts(t, metricsPort), "a watched type outside every WatchRule's namespace never reaches the webhook")
	kubectl(t, "", "-n", "rules-a", "create", "service", "clusterip", "from-flux", "--tcp=80:80", "--dry-run=server", "--field-manager=kustomize-controller",
		"--as", "system:serviceaccount:rules-a:tenant", "--as-group", "system:masters")
	assert.Equal(t, before+1, verdicts(t, metricsPort), "a GitOps controller's field manager under a service account it impersonates skips the webhook (loop guard)")
	kubectl(t, "", "-n", "rules-a", "create", "service", "clusterip", "from-flux", "--tcp=80:80", "--dry-run=server", "--field-manager=kustomize-controller",
		"--as", "mallory", "--as-group", "system:masters")
	assert.Equal(t, before+2, verdicts(t, metricsPort), "a person naming that field manager is judged all the same")

	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: svc
  namespace: rules-a
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: ["apps"]
    resources: ["statefulsets"]
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, "rules edited", func() (bool, string) {
		r := webhookRules(t)
		return strings.Contains(r, "statefulsets") && !strings.Contains(r, "services"), r
	})

	// As in RBAC, every group meets every resource: the README's rule is Ready.
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: svc
  namespace: rules-a
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: ["", "apps"]
    resources: ["configmaps", "deployments", "secrets"]
`, "apply", "-f", "-")
	kubectl(t, "", "-n", "rules-a", "wait", "--for=condition=Ready", "--timeout=30s", "watchrule/svc")
	// "*" brings the webhook the resources the watcher resolved, never "*" itself, nor the
	// cluster's Events and Leases.
	watchRule(t, "rules-a", "everything", `"*"`)
	eventually(t, 30*time.Second, "rules of the resolved resources", func() (bool, string) {
		r := webhookRules(t)
		return strings.Contains(r, "services") && strings.Contains(r, "deployments") && !strings.Contains(r, `"*"`) &&
			!strings.Contains(r, "events") && !strings.Contains(r, "leases") && !strings.Contains(r, "namespaces"), r
	})
	// An upgrade re-applying the configuration with no rules is undone at once, not at the
	// next minute's check.
	kubectl(t, "", "patch", "validatingwebhookconfiguration", webhookConfigName, "--type=json",
		"-p", `[{"op":"test","path":"/webhooks/0/name","value":"watched.reverser.gitops.dev"},{"op":"replace","path":"/webhooks/0/rules","value":[]}]`)
	eventually(t, 15*time.Second, "rules restored", func() (bool, string) {
		r := webhookRules(t)
		return strings.Contains(r, "deployments"), r
	})
	kubectl(t, "", "-n", "rules-a", "delete", "watchrule", "svc", "everything")
	eventually(t, 30*time.Second, "rules removed", func() (bool, string) {
		r := webhookRules(t)
		return !strings.Contains(r, "statefulsets"), r // other tests' rules may watch the rest
	})
}

// verdicts sums gitops_reverser_admission_verdicts_total over all labels.
func verdicts(t *testing.T, port int) int {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	total := 0
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "gitops_reverser_admission_verdicts_total{") {
			f := strings.Fields(line)
			n, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(t, err)
			total += int(n)
		}
	}
	return total
}

func TestOverlappingGitTargetsAreRefused(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "over-a", remote, "clusters/prod", "0s")
	out, err := kubectlErr(fmt.Sprintf(`apiVersion: reverser.gitops.dev/v1alpha1
kind: GitProvider
metadata:
  name: same-repo
  namespace: over-a
spec:
  url: %s/
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: nested
  namespace: over-a
spec:
  providerRef:
    name: same-repo
  branch: main
  path: clusters/prod/team
`, remoteURL(t, remote)), "apply", "-f", "-")
	require.Error(t, err)
	assert.Contains(t, out, `overlaps folder "clusters/prod" of GitTarget over-a/live`)

	out, err = kubectlErr(`apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: other-branch
  namespace: over-a
spec:
  providerRef:
    name: repo
  branch: feature
  path: clusters/prod
`, "apply", "--dry-run=server", "-f", "-")
	require.Error(t, err)
	assert.Contains(t, out, `branch "feature" is not allowed by GitProvider over-a/repo`)

	out, err = kubectlErr(`apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: bad-template
  namespace: over-a
spec:
  providerRef:
    name: repo
  branch: main
  path: clusters/dev
  commitMessage:
    single: "{{.Verb"
`, "apply", "--dry-run=server", "-f", "-")
	require.Error(t, err)
	assert.Contains(t, out, "spec.commitMessage")
}

func TestRuleAuthorsMustBeAllowedToReadWhatTheyRoute(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "authz", remote, "live", "1s")
	// eve may manage WatchRules and read ConfigMaps in authz, but not read its Secrets.
	kubectl(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: rule-author
  namespace: authz
rules:
- apiGroups: ["reverser.gitops.dev"]
  resources: ["watchrules", "gittargets", "gitproviders"]
  verbs: ["get", "list", "create", "update", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
---
`+binding("RoleBinding", "authz", "rule-author", "eve"), "apply", "-f", "-")
	rule := func(resources string) string {
		return fmt.Sprintf("apiVersion: reverser.gitops.dev/v1alpha1\nkind: WatchRule\nmetadata:\n  name: eve\n  namespace: authz\nspec:\n  targetRef:\n    name: live\n  rules:\n  - apiGroups: [\"\"]\n    resources: [%s]\n", resources)
	}
	eve := func(args ...string) []string { return append([]string{"--as", "eve"}, args...) }

	out, err := kubectlErr(rule(`"configmaps", "secrets"`), eve("apply", "-f", "-")...)
	require.Error(t, err, "a rule routing Secrets its author cannot read is refused")
	assert.Contains(t, out, "WatchRule authz/eve: eve may not list secrets in namespace authz")
	assert.NotContains(t, out, "configmaps in namespace", "only the missing permission is named")

	kubectl(t, rule(`"configmaps"`), eve("apply", "-f", "-")...)
	_, err = kubectlErr(rule(`"configmaps", "secrets"`), eve("apply", "-f", "-")...)
	require.Error(t, err, "an update that widens the rule is checked too")

	typo := rule(`"configmaps"`) + "    objectSelector:\n      matchExpressions:\n      - {key: team, operator: in, values: [a]}\n"
	out, err = kubectlErr(typo, eve("apply", "--dry-run=server", "-f", "-")...)
	require.Error(t, err, "a selector the rule's controller could not use is refused at once")
	assert.Contains(t, out, "WatchRule authz/eve: spec.rules[0].objectSelector")

	// live with recipients chosen, as its author would set them.
	encryptedLive := `apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: live
  namespace: authz
spec:
  providerRef:
    name: repo
  branch: main
  path: live
  encryption:
    age:
      recipients: ["age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"]
`
	out, err = kubectlErr(encryptedLive, eve("apply", "-f", "-")...)
	require.Error(t, err, "choosing the recipients of a namespace's Secrets needs the right to read them")
	assert.Contains(t, out, "eve may not get secrets in namespace authz")

	provider := func(secret string) string {
		p := "apiVersion: reverser.gitops.dev/v1alpha1\nkind: GitProvider\nmetadata:\n  name: eves\n  namespace: authz\n" +
			"spec:\n  url: https://git.example.invalid/eve.git\n"
		if secret != "" {
			p += "  secretRef:\n    name: " + secret + "\n"
		}
		return p
	}
	out, err = kubectlErr(provider("flux-git-credentials"), eve("apply", "--dry-run=server", "-f", "-")...)
	require.Error(t, err, "a provider sends its Secret's credentials to the URL its author chose")
	assert.Contains(t, out, "GitProvider authz/eves: spec.secretRef: eve may not get secrets/flux-git-credentials in namespace authz")
	out, err = kubectlErr(provider(""), eve("apply", "--dry-run=server", "-f", "-")...)
	require.NoError(t, err, "a provider without credentials sends none: %s", out)

	// mallory may create ClusterWatchRules and read ConfigMaps everywhere, but not change
	// authz's GitTarget: routing into it would commit through that team's repository.
	kubectl(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: e2e-cluster-rule-author
rules:
- apiGroups: ["reverser.gitops.dev"]
  resources: ["clusterwatchrules"]
  verbs: ["get", "list", "create", "update", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
---
`+binding("ClusterRoleBinding", "", "e2e-cluster-rule-author", "mallory"), "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = kubectlErr("", "delete", "clusterrolebinding/mallory", "clusterrole/e2e-cluster-rule-author", "--ignore-not-found")
	})
	clusterRule := `apiVersion: reverser.gitops.dev/v1alpha1
kind: ClusterWatchRule
metadata:
  name: e2e-mallory
spec:
  targetRef:
    namespace: authz
    name: live
  rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    namespaceSelector: {}
`
	mallory := func(args ...string) []string { return append([]string{"--as", "mallory"}, args...) }
	out, err = kubectlErr(clusterRule, mallory("apply", "--dry-run=server", "-f", "-")...)
	require.Error(t, err, "a ClusterWatchRule into another team's GitTarget needs the right to change that target")
	assert.Contains(t, out, "ClusterWatchRule e2e-mallory: mallory may not update gittargets.reverser.gitops.dev/live in namespace authz")
	kubectl(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: live-editor
  namespace: authz
rules:
- apiGroups: ["reverser.gitops.dev"]
  resources: ["gittargets"]
  resourceNames: ["live"]
  verbs: ["update"]
---
`+binding("RoleBinding", "authz", "live-editor", "mallory"), "apply", "-f", "-")
	out, err = kubectlErr(clusterRule, mallory("apply", "--dry-run=server", "-f", "-")...)
	require.NoError(t, err, "granted update on that GitTarget, the rule is taken: %s", out)

	// A ClusterWatchRule routes Secrets into live (from no namespace yet); trent may read
	// Secrets in authz only, so may not choose the recipients that would open the others.
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: ClusterWatchRule
metadata:
  name: e2e-routed-secrets
spec:
  targetRef:
    namespace: authz
    name: live
  rules:
  - apiGroups: [""]
    resources: ["secrets"]
    namespaceSelector:
      matchLabels:
        e2e-routed: "none-yet"
`, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectlErr("", "delete", "clusterwatchrule/e2e-routed-secrets", "--ignore-not-found") })
	kubectl(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: target-owner
  namespace: authz
rules:
- apiGroups: ["reverser.gitops.dev"]
  resources: ["gittargets"]
  verbs: ["get", "list", "create", "update", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
---
`+binding("RoleBinding", "authz", "target-owner", "trent"), "apply", "-f", "-")
	// The webhook reads ClusterWatchRules from its cache, which may lag the create by a moment.
	eventually(t, 30*time.Second, "the recipients would open Secrets a ClusterWatchRule brings from other namespaces", func() (bool, string) {
		out, err := kubectlErr(encryptedLive, "--as", "trent", "apply", "--dry-run=server", "-f", "-")
		return err != nil && strings.Contains(out, "GitTarget authz/live: spec.encryption: trent may not get secrets in every namespace; "+
			"ClusterWatchRule e2e-routed-secrets route them into the GitTarget"), out
	})
}

// binding is a RoleBinding (namespace set) or ClusterRoleBinding named after user, giving
// them the Role or ClusterRole named role.
func binding(kind, namespace, role, user string) string {
	meta := "  name: " + user + "\n"
	if namespace != "" {
		meta += "  namespace: " + namespace + "\n"
	}
	return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: %s\nmetadata:\n%sroleRef:\n  apiGroup: rbac.authorization.k8s.io\n"+
		"  kind: %s\n  name: %s\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: %s\n",
		kind, meta, strings.TrimSuffix(kind, "Binding"), role, user)
}

func TestAReplicaIsReadyOnlyOnceItCanJudge(t *testing.T) {
	port, err := freePort()
	require.NoError(t, err)
	startOperator(t, t.TempDir(), "--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(port))
	var body string
	eventually(t, 30*time.Second, "ready", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz?verbose", port))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK, body
	})
	// Serving TLS with certificates, and a view that holds the targets and rules: before
	// that, a replica taking traffic would refuse connections or admit writes unjudged.
	assert.Contains(t, body, "[+]webhook ok")
	assert.Contains(t, body, "[+]admission-view ok")
}
