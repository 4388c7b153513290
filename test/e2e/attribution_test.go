package e2e

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// as runs kubectl impersonating user: the API server then authenticates the request as
// that user, exactly what admission sees for a real login.
func as(user string, args ...string) []string {
	return append([]string{"--as", user, "--as-group", "system:masters"}, args...)
}

func configMap(ns, name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %q\n", name, ns, value)
}

// history lists "author <email>|committer|subject" on main, newest first.
func history(t *testing.T, remote string) []string {
	t.Helper()
	out, err := gitErr(remote, "log", "--format=%an <%ae>|%cn|%s", "main")
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

func TestCommitAuthorIsTheUserTheAPIServerAuthenticated(t *testing.T) {
	remote := newRemote(t)
	op := startOperator(t, t.TempDir())
	// Quiet long enough that one kubectl call between alice's two applies never splits her
	// window on a loaded machine.
	setupTarget(t, "authors", remote, "live", "5s")
	watchConfigMaps(t, "authors", "")

	// Interleaved authors keep separate windows: one commit each, authored by each.
	kubectl(t, configMap("authors", "alice-app", "1"), as("alice", "apply", "-f", "-")...)
	kubectl(t, configMap("authors", "bob-app", "1"), as("system:serviceaccount:ci:deployer", "apply", "-f", "-")...)
	kubectl(t, configMap("authors", "alice-db", "1"), as("alice", "apply", "-f", "-")...)
	waitFile(t, remote, "live/authors/configmaps/alice-db.yaml", func(string) bool { return true })
	waitFile(t, remote, "live/authors/configmaps/bob-app.yaml", func(string) bool { return true })
	h := history(t, remote)
	assert.Contains(t, h, "alice <alice@cluster.local>|GitOps Reverser|authors/live: 2 changes by alice", "history:\n%s", strings.Join(h, "\n"))
	assert.Contains(t, h, "system:serviceaccount:ci:deployer <system-serviceaccount-ci-deployer@cluster.local>|GitOps Reverser|Create ConfigMap authors/bob-app")

	// An update and a delete are joined too.
	kubectl(t, configMap("authors", "alice-app", "2"), as("bob", "apply", "-f", "-")...)
	waitFile(t, remote, "live/authors/configmaps/alice-app.yaml", func(c string) bool { return strings.Contains(c, `"2"`) })
	kubectl(t, "", as("carol", "-n", "authors", "delete", "configmap", "bob-app")...)
	eventually(t, commitWait, "the delete commit", func() (bool, string) {
		_, ok := fileAt(remote, "live/authors/configmaps/bob-app.yaml")
		return !ok, ""
	})
	h = history(t, remote)
	assert.Equal(t, "carol <carol@cluster.local>|GitOps Reverser|Delete ConfigMap authors/bob-app", h[0])
	assert.Equal(t, "bob <bob@cluster.local>|GitOps Reverser|Update ConfigMap authors/alice-app", h[1])

	// An object a controller adopts leaves Git like a deleted one: authored by who adopted
	// it (there is no garbage collector here to remove it for its unknown owner).
	adopt := `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"api",` +
		`"uid":"6b1c7d3e-0000-4000-8000-000000000002","controller":true}]}}`
	kubectl(t, "", as("dave", "-n", "authors", "patch", "configmap", "alice-db", "--type=merge", "-p", adopt)...)
	eventually(t, commitWait, "the adopted object's removal", func() (bool, string) {
		_, ok := fileAt(remote, "live/authors/configmaps/alice-db.yaml")
		return !ok, ""
	})
	assert.Equal(t, "dave <dave@cluster.local>|GitOps Reverser|Delete ConfigMap authors/alice-db", history(t, remote)[0])
	assert.NotContains(t, op.logs.String(), "panic")
}

func commitRequest(ns, name, message, timeout string) string {
	return fmt.Sprintf(`apiVersion: reverser.gitops.dev/v1alpha1
kind: CommitRequest
metadata:
  name: %s
  namespace: %s
spec:
  targetRef:
    name: live
  message: %q
  timeout: %s
  requester:
    username: mallory
`, name, ns, message, timeout)
}

func TestCommitRequestBeforeDuringAndAfterTheAuthorsWindow(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	// A long quiet period: only a CommitRequest can make these commits come early. A window
	// then commits on its own after maxDelay (30s by default), far from the 18s below.
	setupTarget(t, "requests", remote, "live", "60s")
	watchConfigMaps(t, "requests", "")

	t.Run("during: the open window commits at once with the message", func(t *testing.T) {
		kubectl(t, configMap("requests", "flags", "on"), as("alice", "apply", "-f", "-")...)
		kubectl(t, configMap("requests", "other", "x"), as("bob", "apply", "-f", "-")...)
		start := time.Now()
		kubectl(t, commitRequest("requests", "during", "Turn the flags on\n\nTicket: OPS-1", "60s"), as("alice", "apply", "-f", "-")...)
		kubectl(t, "", "-n", "requests", "wait", "--for=condition=Committed", "--timeout=60s", "commitrequest/during")
		assert.Less(t, time.Since(start), 18*time.Second, "the request closes the window before it would close on its own")
		assert.Equal(t, "Committed", committedReason(t, "during"))
		sha := kubectl(t, "", "-n", "requests", "get", "commitrequest/during", "-o", "jsonpath={.status.sha}")
		msg := git(t, remote, "log", "-1", "--format=%an|%B", sha)
		assert.Equal(t, "alice|Turn the flags on\n\nTicket: OPS-1", strings.TrimSpace(msg))
		files := git(t, remote, "show", "--name-only", "--format=", sha)
		assert.Equal(t, "live/requests/configmaps/flags.yaml", strings.TrimSpace(files), "bob's change is not alice's to commit")
		requester := kubectl(t, "", "-n", "requests", "get", "commitrequest/during", "-o", "jsonpath={.spec.requester.username}")
		assert.Equal(t, "alice", requester, "a requester sent by the client is replaced by the authenticated one")
	})

	t.Run("before: the request waits for the author's next change", func(t *testing.T) {
		kubectl(t, commitRequest("requests", "before", "Scale down for the night", "60s"), as("alice", "apply", "-f", "-")...)
		kubectl(t, "", "-n", "requests", "wait", "--for=jsonpath={.status.conditions[?(@.type==\"Committed\")].reason}=Waiting",
			"--timeout=60s", "commitrequest/before") // the writer holds it before her change comes
		kubectl(t, configMap("requests", "scale", "1"), as("alice", "apply", "-f", "-")...)
		kubectl(t, "", "-n", "requests", "wait", "--for=condition=Committed", "--timeout=60s", "commitrequest/before")
		assert.Equal(t, "Committed", committedReason(t, "before"))
		sha := kubectl(t, "", "-n", "requests", "get", "commitrequest/before", "-o", "jsonpath={.status.sha}")
		assert.Equal(t, "Scale down for the night", strings.TrimSpace(git(t, remote, "log", "-1", "--format=%B", sha)))
	})

	t.Run("after: once the author's window committed on its own, the request times out and says so", func(t *testing.T) {
		// bob's change of the first case, committed when its window's maxDelay ended
		waitFile(t, remote, "live/requests/configmaps/other.yaml", func(string) bool { return true })
		kubectl(t, commitRequest("requests", "after", "Nothing to see", "3s"), as("bob", "apply", "-f", "-")...)
		kubectl(t, "", "-n", "requests", "wait", "--for=jsonpath={.status.conditions[?(@.type==\"Committed\")].reason}=TimedOut", "--timeout=60s", "commitrequest/after")
		msg := kubectl(t, "", "-n", "requests", "get", "commitrequest/after", "-o", "jsonpath={.status.conditions[?(@.type==\"Committed\")].message}")
		assert.Contains(t, msg, "the message was not used")
		status := kubectl(t, "", "-n", "requests", "get", "commitrequest/after", "-o", "jsonpath={.status.conditions[?(@.type==\"Committed\")].status}")
		assert.Equal(t, "False", status)
		assert.NotContains(t, git(t, remote, "log", "--format=%B", "main"), "Nothing to see")
	})

	t.Run("a request for a GitTarget that does not exist is refused", func(t *testing.T) {
		out, err := kubectlErr(strings.Replace(commitRequest("requests", "nowhere", "m", "5s"), "name: live", "name: missing", 1), "apply", "-f", "-")
		require.Error(t, err)
		assert.Contains(t, out, "GitTarget requests/missing")
	})
}

// committedReason is the reason of CommitRequest requests/name's Committed condition.
func committedReason(t *testing.T, name string) string {
	t.Helper()
	return kubectl(t, "", "-n", "requests", "get", "commitrequest/"+name, "-o", `jsonpath={.status.conditions[?(@.type=="Committed")].reason}`)
}

func TestAReplicaThatDoesNotLeadForwardsWhoMadeTheChange(t *testing.T) {
	remote := newRemote(t)
	leaderPort, err := freePort()
	require.NoError(t, err)
	leaderAddr := fmt.Sprintf("127.0.0.1:%d", leaderPort)
	// The leader serves on a port the API server never calls; the API server calls the other
	// replica, which must hand each record to the leader, where the watcher and writer run.
	leader := startReplica(t, t.TempDir(), leaderPort, t.TempDir(), "--leader-elect", "--advertise-address", leaderAddr)
	eventually(t, 60*time.Second, "the first replica to lead", func() (bool, string) {
		return strings.Contains(leader.logs.String(), "Successfully acquired lease"), ""
	})
	follower := startReplica(t, t.TempDir(), shared.webhookPort, shared.certDir, "--leader-elect",
		"--advertise-address", fmt.Sprintf("127.0.0.1:%d", shared.webhookPort))
	// A file only the leader's folder index knows: ConfigMap other's document where taken's
	// would go.
	seedFile(t, remote, "live/replicas/configmaps/taken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: replicas\n")
	setupTarget(t, "replicas", remote, "live", "1s")
	watchConfigMaps(t, "replicas", "")

	kubectl(t, configMap("replicas", "app", "1"), as("dave", "apply", "-f", "-")...)
	waitFile(t, remote, "live/replicas/configmaps/app.yaml", func(string) bool { return true })
	assert.Equal(t, "dave <dave@cluster.local>|GitOps Reverser|Create ConfigMap replicas/app", history(t, remote)[0])
	assert.NotContains(t, follower.logs.String(), "Successfully acquired lease", "the replica the API server calls never led")

	// The replica the API server calls asks the leader where taken would land: denied there
	// as on the leader, at the dry run as at the apply.
	out := waitDenied(t, configMap("replicas", "taken", "1"), "apply", "--dry-run=server", "-f", "-")
	assert.Contains(t, out, "live/replicas/configmaps/taken.yaml")
}

func TestNamespaceWritesAreAuthoredByTheirUsers(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "ns-authors", remote, "cluster", "0s")
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: ClusterWatchRule
metadata:
  name: namespaces
spec:
  targetRef:
    namespace: ns-authors
    name: live
  rules:
  - apiGroups: [""]
    resources: ["namespaces"]
    objectSelector:
      matchLabels:
        mirrored: "yes"
`, "apply", "-f", "-")
	kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=60s", "clusterwatchrule/namespaces")
	path := "cluster/_cluster/namespaces/authored-ns.yaml"
	// The API server sends a Namespace's own name as request.namespace; it must still be
	// routed (and recorded) as the cluster-scoped object it is.
	eventually(t, 30*time.Second, "the Namespace create authored by alice", func() (bool, string) {
		kubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: authored-ns\n  labels:\n    mirrored: \"yes\"\n", as("alice", "apply", "-f", "-")...)
		_, ok := fileAt(remote, path)
		return ok, "not yet"
	})
	assert.Contains(t, history(t, remote)[0], "alice <", "the create")
	kubectl(t, "", as("bob", "label", "namespace", "authored-ns", "extra=1")...)
	waitFile(t, remote, path, func(c string) bool { return strings.Contains(c, "extra") })
	assert.Contains(t, history(t, remote)[0], "bob <", "the update")
}

func TestAScaleIsAuthoredByWhoScaled(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "scaled", remote, "live", "0s")
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: deployments
  namespace: scaled
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: ["apps"]
    resources: ["deployments"]
`, "apply", "-f", "-")
	kubectl(t, "", "-n", "scaled", "wait", "--for=condition=Ready", "--timeout=60s", "watchrule/deployments")
	path := "live/scaled/apps/deployments/web.yaml"
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: scaled
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`
	kubectl(t, deployment, as("alice", "apply", "-f", "-")...)
	waitFile(t, remote, path, func(string) bool { return true })
	// kubectl scale writes the scale subresource, whose request holds a Scale, not the
	// Deployment: the watched entry never sees it; the recorded entry records who made it.
	kubectl(t, "", as("bob", "-n", "scaled", "scale", "deployment", "web", "--replicas=3")...)
	waitFile(t, remote, path, func(c string) bool { return strings.Contains(c, "replicas: 3") })
	h := history(t, remote)
	assert.Contains(t, h[0], "bob <bob@cluster.local>|GitOps Reverser|", "history:\n%s", strings.Join(h, "\n"))
}

// denyingWebhook serves one more validating webhook, as another admission controller would
// (OPA, Kyverno), that denies every delete by user: its TLS certificate is httptest's, so
// the API server reaches it at 127.0.0.1 with that CA.
func denyingWebhook(t *testing.T, ns, user string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		allowed := review.Request.UserInfo.Username != user || review.Request.Operation != admissionv1.Delete
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: allowed,
			Result: &metav1.Status{Message: "denied by another admission controller"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kubectl(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: deny-%[1]s-deletes
webhooks:
- name: deny.example.com
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    url: %[2]s
    caBundle: %[3]s
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: %[4]s
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["DELETE"]
    resources: ["configmaps"]
`, user, srv.URL, base64.StdEncoding.EncodeToString(ca), ns), "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectlErr("", "delete", "validatingwebhookconfiguration", "deny-"+user+"-deletes") })
}

func TestAGitOpsControllersDeleteIsNeverCreditedToAnEarlierDeniedRequest(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	const ns = "skipped-authors"
	setupTarget(t, ns, remote, "live", "0s")
	watchConfigMaps(t, ns, "")
	flux := "system:serviceaccount:flux-system:kustomize-controller" // a default skip user
	for _, name := range []string{"app", "db"} {
		kubectl(t, configMap(ns, name, "1"), as("alice", "apply", "-f", "-")...)
		waitFile(t, remote, "live/"+ns+"/configmaps/"+name+".yaml", func(string) bool { return true })
	}
	denyingWebhook(t, ns, "alice")
	eventually(t, 30*time.Second, "alice's delete denied by the other controller", func() (bool, string) {
		out, err := kubectlErr("", as("alice", "-n", ns, "delete", "configmap", "app")...)
		return err != nil && strings.Contains(out, "denied by another admission controller"), out
	})

	// Flux deletes it: this webhook never judges Flux, but its recorded entry sees who
	// deleted, so alice's record (her request passed this webhook) cannot claim the deletion.
	kubectl(t, "", as(flux, "-n", ns, "delete", "configmap", "app")...)
	eventually(t, commitWait, "the delete commit", func() (bool, string) {
		_, ok := fileAt(remote, "live/"+ns+"/configmaps/app.yaml")
		return !ok, ""
	})
	assert.NotContains(t, history(t, remote)[0], "alice", "never credited to a request that was denied")

	// A change of Flux's alone is authored by Flux.
	kubectl(t, "", as(flux, "-n", ns, "delete", "configmap", "db")...)
	eventually(t, commitWait, "the second delete commit", func() (bool, string) {
		_, ok := fileAt(remote, "live/"+ns+"/configmaps/db.yaml")
		return !ok, ""
	})
	assert.Equal(t, flux+" <system-serviceaccount-flux-system-kustomize-controller@cluster.local>|GitOps Reverser|Delete ConfigMap "+ns+"/db",
		history(t, remote)[0])
}
