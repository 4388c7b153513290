package e2e

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/webhook"
)

// TestAWriteBeforeTheViewIsBuiltMeetsTheFailurePolicy serves the watched entry in-process,
// as the binary registers it, from a view whose cache has not started: the binary cannot
// be held at that moment, and readiness does not guard an entry whose clientConfig is a
// URL. Under failurePolicy Fail the API server refuses the write, saying why, instead of
// taking an answer that would allow it unjudged; once the view is built it is judged.
func TestAWriteBeforeTheViewIsBuiltMeetsTheFailurePolicy(t *testing.T) {
	const ns = "unbuilt-view"
	kubectl(t, "", "create", "namespace", ns)
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c, err := cache.New(shared.env.Config, cache.Options{Scheme: scheme})
	require.NoError(t, err)
	view := webhook.NewView(c, logr.Discard())
	watched := &webhook.Watched{View: view, Sensitive: func(schema.GroupResource) bool { return false }}
	srv := httptest.NewTLSServer(view.OnceBuilt(&admission.Webhook{Handler: watched}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kubectl(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[1]s
webhooks:
- name: watched.%[1]s.example.com
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    url: %[2]s%[3]s
    caBundle: %[4]s
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: %[1]s
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["configmaps"]
`, ns, srv.URL, webhook.WatchedPath, base64.StdEncoding.EncodeToString(ca)), "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectlErr("", "delete", "validatingwebhookconfiguration", ns) })

	eventually(t, 30*time.Second, "the write refused while the view is not built", func() (bool, string) {
		out, err := kubectlErr("", "-n", ns, "create", "configmap", "early")
		return err != nil && strings.Contains(out, "has not read the GitTargets and watch rules yet"), out
	})

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	go func() { _ = view.Start(ctx) }()
	eventually(t, 30*time.Second, "the view built", func() (bool, string) {
		if err := view.Ready(nil); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	out, err := kubectlErr("", "-n", ns, "create", "configmap", "early")
	require.NoError(t, err, out)
}

// TestAnOwnedObjectIsNeverSentToTheWebhook registers an entry as RuleSync writes it, with the
// owned-object condition, under failurePolicy Fail, at an address where nothing answers: the
// operator down. The API server compiles the condition and refuses a write it sends, but
// sends none of an object a controller owns, before and after the write; one the write
// orphans is sent, since for Git it arrives.
func TestAnOwnedObjectIsNeverSentToTheWebhook(t *testing.T) {
	const ns = "owned-skip"
	kubectl(t, "", "create", "namespace", ns)
	entry := admissionv1.ValidatingWebhook{Name: "watched." + ns + ".example.com"}
	rules := []webhook.RuleSpec{{Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
		Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	webhook.ApplyPolicy(&entry, rules, webhook.WebhookPolicy{FailurePolicy: admissionv1.Fail, TimeoutSecond: 2, SkipOwned: true,
		ExcludedNamespaces: []string{"kube-system"}})
	registerDown(t, ns, entry)

	eventually(t, 30*time.Second, "a plain object's write sent, and refused", func() (bool, string) {
		out, err := kubectlErr("", "-n", ns, "create", "configmap", "plain")
		return err != nil && strings.Contains(out, "failed calling webhook"), out
	})
	owned := `apiVersion: v1
kind: ConfigMap
metadata:
  name: owned
  namespace: ` + ns + `
  ownerReferences:
  - apiVersion: apps/v1
    kind: Deployment
    name: api
    uid: 6b1c7d3e-0000-4000-8000-000000000002
    controller: true
data:
  k: v
`
	out, err := kubectlErr(owned, "create", "-f", "-")
	require.NoError(t, err, "an owned object's creation is not sent: %s", out)
	out, err = kubectlErr("", "-n", ns, "label", "configmap", "owned", "x=y")
	require.NoError(t, err, "nor its update: %s", out)
	out, err = kubectlErr("", "-n", ns, "patch", "configmap", "owned", "--type=json", `-p=[{"op":"remove","path":"/metadata/ownerReferences"}]`)
	require.Error(t, err, "an update that orphans it is sent: %s", out)
	assert.Contains(t, out, "failed calling webhook")
	out, err = kubectlErr("", "-n", ns, "delete", "configmap", "owned")
	require.NoError(t, err, "nor its deletion: %s", out)
}

// TestAnUpdateOfTheOperatorsOwnObjectThatKeepsItsSpecIsNeverSent registers the own-resources
// entry as the operator's manifests do, under failurePolicy Fail, at an address where nothing
// answers: the operator down. A label or a finalizer's removal still goes through, so a
// deletion or an uninstall is never held up; a change of the spec is refused.
func TestAnUpdateOfTheOperatorsOwnObjectThatKeepsItsSpecIsNeverSent(t *testing.T) {
	const ns = "own-down"
	startOperator(t, t.TempDir()) // the GitTarget is created while the operator answers
	kubectl(t, "", "create", "namespace", ns)
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: live
  namespace: `+ns+`
  finalizers: ["example.com/hold"]
spec:
  providerRef:
    name: nowhere
  branch: main
  path: clusters/own-down
`, "apply", "-f", "-")
	entry := admissionv1.ValidatingWebhook{Name: "own." + ns + ".example.com", AdmissionReviewVersions: []string{"v1"},
		SideEffects: ptr.To(admissionv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionv1.Fail), TimeoutSeconds: ptr.To(int32(2)),
		Rules: webhook.OwnRules(), MatchConditions: webhook.OwnMatchConditions()}
	registerDown(t, ns, entry)

	eventually(t, 30*time.Second, "a change of the spec sent, and refused", func() (bool, string) {
		out, err := kubectlErr("", "-n", ns, "patch", "gittarget", "live", "--type=merge", `-p={"spec":{"commitWindow":{"quiet":"2s"}}}`)
		return err != nil && strings.Contains(out, "failed calling webhook"), out
	})
	out, err := kubectlErr("", "-n", ns, "label", "gittarget", "live", "team=a")
	require.NoError(t, err, "a label is not sent: %s", out)
	out, err = kubectlErr("", "-n", ns, "delete", "gittarget", "live", "--wait=false")
	require.NoError(t, err, out)
	out, err = kubectlErr("", "-n", ns, "patch", "gittarget", "live", "--type=json", `-p=[{"op":"remove","path":"/metadata/finalizers"}]`)
	require.NoError(t, err, "the finalizer's removal is not sent, so the deletion ends: %s", out)
}

// registerDown registers entry, for namespace ns only, in a configuration of that name at an
// address where nothing answers: the operator down. The API server compiles its conditions.
func registerDown(t *testing.T, ns string, entry admissionv1.ValidatingWebhook) {
	t.Helper()
	entry.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")}
	entry.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	cs, err := kubernetes.NewForConfig(shared.env.Config)
	require.NoError(t, err)
	vwc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns}, Webhooks: []admissionv1.ValidatingWebhook{entry}}
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), vwc, metav1.CreateOptions{})
	require.NoError(t, err, "the API server compiles the entry's conditions")
	t.Cleanup(func() { _, _ = kubectlErr("", "delete", "validatingwebhookconfiguration", ns) })
}

// TestTheShippedWebhookManifestsAreValid has the API server check config/webhook/manifests.yaml
// as users apply it (a server-side dry run): required fields, and its match conditions
// compiled.
func TestTheShippedWebhookManifestsAreValid(t *testing.T) {
	raw, err := os.ReadFile("../../config/webhook/manifests.yaml")
	require.NoError(t, err)
	// Under a name of its own: the suite's operators use gitops-reverser.
	shipped := strings.ReplaceAll(string(raw), "metadata:\n  name: gitops-reverser\n", "metadata:\n  name: shipped-manifests\n")
	require.Equal(t, 2, strings.Count(shipped, "name: shipped-manifests"))
	out, err := kubectlErr(shipped, "create", "--dry-run=server", "-f", "-")
	require.NoError(t, err, out)
	assert.Contains(t, out, "validatingwebhookconfiguration.admissionregistration.k8s.io/shipped-manifests created (server dry run)")
	assert.Contains(t, out, "mutatingwebhookconfiguration.admissionregistration.k8s.io/shipped-manifests created (server dry run)")
}
