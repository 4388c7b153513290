package e2e

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
