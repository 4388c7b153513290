package certs_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/certs"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

const denial = "denied by the certs rotation test"

// denyAll answers every admission request with a denial, so that a test sees the API server
// reached the webhook: with failurePolicy Ignore a failed call would be allowed instead.
var denyAll = &webhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Denied(denial)
})}

// Two replicas (both running the issuer, as if leadership flapped on every renewal) share one
// self-managed Secret; each serves the webhook of its own entry of one configuration. With
// certificates living 4 s and a CA living 12 s, the test sees at least two certificate
// renewals and a CA rotation, and after each new certificate a client that trusts only the
// configuration's current caBundle — and the API server itself — still reach both replicas.
func TestSelfManagedRotationKeepsTheWebhookServing(t *testing.T) {
	ctx := context.Background()
	ports := []int{freePort(t), freePort(t)}
	vwc := rotationConfiguration("certs-rotation-test", ports)
	require.NoError(t, k8s.Create(ctx, vwc))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), vwc) })
	before := vwc.DeepCopy()
	mwc := mutatingConfiguration("certs-rotation-test", ports[0])
	require.NoError(t, k8s.Create(ctx, mwc))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), mwc) })

	opts := certs.Options{
		Mode: certs.ModeSelfManaged, Namespace: "default", SecretName: "rotation-webhook-tls", ServiceName: "hook",
		ExtraIPs:                      []net.IP{net.ParseIP("127.0.0.1")},
		WebhookConfigurations:         []string{vwc.Name},
		MutatingWebhookConfigurations: []string{mwc.Name},
		// Short enough to rotate twice within the test, long enough that a loaded machine
		// reloads each certificate well before the one it replaces expires.
		CAValidity: 30 * time.Second, CARenewBefore: 15 * time.Second,
		CertValidity: 10 * time.Second, RenewBefore: 5 * time.Second,
	}
	var replicas []*operator
	for _, port := range ports {
		o := opts
		o.CertDir = t.TempDir()
		replicas = append(replicas, startOperator(t, o, port, func(s webhook.Server) { s.Register("/validate", denyAll) }))
	}

	var sec corev1.Secret
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: opts.SecretName}, &sec))
	assert.Equal(t, corev1.SecretTypeTLS, sec.Type)
	assert.Equal(t, "webhook-certificate", sec.Labels[batch.KeyMaterialLabel], "key material: never written to Git, whichever rule routes it")
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		assert.NotEmpty(t, sec.Data[k], k)
	}

	w := watchRotation{t: t, vwcName: vwc.Name, serials: map[string]map[string]bool{}}
	first := w.injectedBundle()
	for _, r := range replicas {
		waitServing(t, r.addr, first, func(*x509.Certificate) bool { return true })
	}
	for deadline := time.Now().Add(60 * time.Second); !w.done(); time.Sleep(150 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "saw certificates %v and %d CAs; want 3 per replica and 2, with a certificate of the newer CA served", w.serials, len(w.cas))
		for i, r := range replicas {
			w.check(r.addr, fmt.Sprintf("rotation-%d", i))
		}
	}

	var after admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(vwc), &after))
	for i := range after.Webhooks {
		assert.NotEmpty(t, after.Webhooks[i].ClientConfig.CABundle)
	}
	bundle := after.Webhooks[0].ClientConfig.CABundle
	eventuallyBundle := func() bool {
		var m admissionregistrationv1.MutatingWebhookConfiguration
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(mwc), &m))
		return string(m.Webhooks[0].ClientConfig.CABundle) == string(bundle)
	}
	assert.Eventually(t, eventuallyBundle, 10*time.Second, 100*time.Millisecond, "the MutatingWebhookConfiguration carries the same, rotated bundle")
	for i := range after.Webhooks {
		after.Webhooks[i].ClientConfig.CABundle = nil
	}
	assert.Equal(t, before.Webhooks, after.Webhooks, "only caBundle changes")
}

// mutatingConfiguration has one mutating webhook that the API server never calls (no rules):
// the issuer must inject into it as into the validating one.
func mutatingConfiguration(name string, port int) *admissionregistrationv1.MutatingWebhookConfiguration {
	u := (&url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), Path: "/mutate"}).String()
	none := admissionregistrationv1.SideEffectClassNone
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutating.certs.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}}}
}

// rotationConfiguration has one webhook per replica, each called by the API server only for
// ConfigMaps labelled certs-test=rotation-<i>.
func rotationConfiguration(name string, ports []int) *admissionregistrationv1.ValidatingWebhookConfiguration {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(10)
	for i, port := range ports {
		u := (&url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), Path: "/validate"}).String()
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    fmt.Sprintf("replica-%d.certs.test", i),
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &u},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"certs-test": fmt.Sprintf("rotation-%d", i)}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
		})
	}
	return vwc
}

// watchRotation records what the replicas serve as certificates rotate.
type watchRotation struct {
	t         *testing.T
	vwcName   string
	serials   map[string]map[string]bool // per replica address
	cas       [][]byte                   // subject key IDs of the signing CAs, in the order seen
	newerCAOK bool                       // a certificate of a CA other than the first was served and trusted
}

// done is true once every replica served three certificates (two renewals) and a
// certificate of a rotated CA was served.
func (w *watchRotation) done() bool {
	for _, seen := range w.serials {
		if len(seen) < 3 {
			return false
		}
	}
	return len(w.serials) > 0 && len(w.cas) >= 2 && w.newerCAOK
}

// check connects to one replica trusting only the configuration's current caBundle; on each
// new certificate it also has the API server call that replica's webhook.
func (w *watchRotation) check(addr, label string) {
	w.t.Helper()
	leaf, err := servedCert(addr, w.injectedBundle())
	if err != nil {
		// The configuration may have changed between the read and the handshake: read again.
		leaf, err = servedCert(addr, w.injectedBundle())
		require.NoError(w.t, err, "a client trusting the configuration's caBundle must reach %s", addr)
	}
	serial := leaf.SerialNumber.Text(16)
	if w.serials[addr] == nil {
		w.serials[addr] = map[string]bool{}
	}
	if !w.serials[addr][serial] {
		w.serials[addr][serial] = true
		w.t.Logf("%s serves certificate %s (valid until %s)", addr, serial, leaf.NotAfter.Format(time.TimeOnly))
		requireAPIServerReaches(w.t, label)
	}
	if len(w.cas) > 1 && !bytes.Equal(leaf.AuthorityKeyId, w.cas[0]) {
		w.newerCAOK = true
	}
}

// injectedBundle is the caBundle of the configuration, equal on every webhook; it waits for
// the first injection.
func (w *watchRotation) injectedBundle() []byte {
	w.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		require.NoError(w.t, k8s.Get(context.Background(), client.ObjectKey{Name: w.vwcName}, &vwc))
		bundle := vwc.Webhooks[0].ClientConfig.CABundle
		if !allCarry(vwc.Webhooks, bundle) || len(bundle) == 0 {
			continue // between the patch of one replica and the next
		}
		w.noteCA(bundle)
		return bundle
	}
	w.t.Fatalf("ValidatingWebhookConfiguration %s never carried one caBundle on all its webhooks", w.vwcName)
	return nil
}

// noteCA records the bundle's signing CA (its first certificate).
func (w *watchRotation) noteCA(bundle []byte) {
	certs, err := certutil.ParseCertsPEM(bundle)
	require.NoError(w.t, err)
	ski := certs[0].SubjectKeyId
	for _, seen := range w.cas {
		if bytes.Equal(seen, ski) {
			return
		}
	}
	w.cas = append(w.cas, ski)
	w.t.Logf("caBundle now starts with CA %x (%d CAs in the bundle)", ski, len(certs))
}

// allCarry reports whether every webhook has exactly bundle.
func allCarry(hooks []admissionregistrationv1.ValidatingWebhook, bundle []byte) bool {
	for _, h := range hooks {
		if !bytes.Equal(h.ClientConfig.CABundle, bundle) {
			return false
		}
	}
	return true
}

// requireAPIServerReaches has the API server call the webhook selected by label (a dry-run
// create) and requires its denial: the API server trusted the served certificate.
func requireAPIServerReaches(t *testing.T, label string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: "default", Labels: map[string]string{"certs-test": label}}}
	err := k8s.Create(context.Background(), cm, client.DryRunAll)
	require.ErrorContains(t, err, denial, "the API server must reach the webhook %s", label)
}
