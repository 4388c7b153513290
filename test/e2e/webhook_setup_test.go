package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The e2e runs the binary out of cluster, so its webhook is reached at 127.0.0.1 with a CA
// made here (TESTING.md); in a cluster the certs package or cert-manager provides it.
const webhookConfigName = "gitops-reverser"

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// installWebhookConfiguration registers both webhooks the way the chart does, but with a
// URL client config: the watched-objects entry starts with no rules (the operator fills
// them), the own-resources entry validates GitTargets and fails closed.
func installWebhookConfiguration(cs kubernetes.Interface, port int, caBundle []byte) error {
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName},
		Webhooks: []admissionv1.ValidatingWebhook{
			{
				Name:                    "watched.reverser.gitops.dev",
				ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To(base + "/validate/watched"), CABundle: caBundle},
				SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				FailurePolicy:           ptr.To(admissionv1.Ignore),
			},
			{
				Name:                    "reverser.gitops.dev",
				ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To(base + "/validate/reverser"), CABundle: caBundle},
				SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				FailurePolicy:           ptr.To(admissionv1.Fail),
				TimeoutSeconds:          ptr.To(int32(5)),
				Rules: []admissionv1.RuleWithOperations{{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{"reverser.gitops.dev"}, APIVersions: []string{"v1alpha1"},
						Resources: []string{"gittargets"}},
				}},
			},
		},
	}
	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), vwc, metav1.CreateOptions{})
	return err
}

// waitTLS waits until the webhook server at port completes a TLS handshake.
func waitTLS(port int, caBundle []byte, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caBundle)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("webhook server on 127.0.0.1:%d not serving TLS after %s", port, timeout)
}
