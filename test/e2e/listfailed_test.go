package e2e

import (
	"strings"
	"testing"
	"time"
)

// gadgetsCRD serves gadgets.e2e.example.com at v1 (stored) and v2 (preferred), converted
// by a webhook nothing answers: an object stored at v1 cannot be read at v2, as when a
// CRD's conversion webhook is down.
const gadgetsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.e2e.example.com
spec:
  group: e2e.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig:
        url: https://127.0.0.1:1/convert
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

func TestAResourceThatCannotBeListedSaysSoOnItsRule(t *testing.T) {
	kubectl(t, gadgetsCRD, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectlErr("", "delete", "crd", "gadgets.e2e.example.com", "--wait=false") })
	kubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/gadgets.e2e.example.com")
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	const ns = "unlistable"
	setupTarget(t, ns, remote, "live", "0s")
	// A field besides metadata: an object of none is not sent to the conversion webhook.
	kubectl(t, "apiVersion: e2e.example.com/v1\nkind: Gadget\nmetadata:\n  name: stored-at-v1\n  namespace: "+ns+"\nspec:\n  size: 1\n", "apply", "-f", "-")
	kubectl(t, `apiVersion: reverser.gitops.dev/v1alpha1
kind: WatchRule
metadata:
  name: gadgets
  namespace: `+ns+`
spec:
  targetRef:
    name: live
  rules:
  - apiGroups: ["e2e.example.com"]
    resources: ["gadgets"]
`, "apply", "-f", "-")

	condition := func() (bool, string) {
		out, err := kubectlErr("", "-n", ns, "get", "watchrule", "gadgets", "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].reason}|{.status.conditions[?(@.type=="Ready")].message}`)
		return err == nil, out
	}
	// The API server streams the list (client-go's watch-list) and holds it on the object it
	// cannot convert: no error reaches the operator, which reports the list as not finished.
	eventually(t, 120*time.Second, "the rule says its resource has not listed", func() (bool, string) {
		ok, out := condition()
		return ok && strings.HasPrefix(out, "False|ListFailed|") && strings.Contains(out, "gadgets.e2e.example.com has not finished its first list in over a minute"), out
	})
	kubectl(t, "", "-n", ns, "delete", "gadgets.v1.e2e.example.com", "stored-at-v1") // at the version it is stored at
}
