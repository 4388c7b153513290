package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gitops-reverser/gitops-reverser/webhook"
)

// The e2e runs the binary out of cluster: its webhook is reached at 127.0.0.1, and the
// operator's self-managed certificate (with an IP SAN for it) and caBundle are used as in a
// cluster.
const (
	webhookConfigName = "gitops-reverser"
	operatorNamespace = "gitops-reverser-system"
)

// injectedCABundle returns the caBundle the operator wrote into every entry, once it has.
func injectedCABundle(timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		out, err := kubectlErr("", "get", "validatingwebhookconfiguration", webhookConfigName, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}")
		if f := strings.Fields(out); err == nil && len(f) == 3 && f[0] == f[1] && f[1] == f[2] {
			return base64.StdEncoding.DecodeString(f[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("the operator did not inject a caBundle into %s within %s", webhookConfigName, timeout)
}

// freePort returns a free loopback port for the operator to listen on later, below the
// kernel's ephemeral range: a port the kernel handed out (port 0) is its to hand out again
// between this check and the operator's listen, or while the suite restarts the operator
// on it, to any test of another package running beside (a listener on port 0, an outgoing
// connection). Outside that range only an explicit bind can take it.
// A port handed out once is not handed out again in this run: the suite's webhook port is
// free whenever the operator is stopped.
func freePort() (int, error) {
	from, to := nonEphemeralPorts()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 200 {
		port := from + rand.IntN(to-from)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken
		}
		_ = l.Close()
		handedOut.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d", from, to)
}

// handedOut holds the ports freePort returned.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// nonEphemeralPorts is a range of ports outside the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range; Linux's default 32768–60999 when it cannot be
// read): below it when it leaves room there, else above it.
func nonEphemeralPorts() (from, to int) {
	low, high := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, errL := strconv.Atoi(f[0])
			h, errH := strconv.Atoi(f[1])
			if errL == nil && errH == nil && l <= h {
				low, high = l, h
			}
		}
	}
	switch {
	case low-10000 >= 1000:
		return 10000, low
	case 65536-(high+1) >= 1000:
		return high + 1, 65536
	}
	return 1024, 65536 // nearly every port is ephemeral: none is safe from it
}

// installWebhookConfiguration registers both webhooks the way the chart does, but with a
// URL client config: the watched-objects entry starts with no rules (the operator fills
// them), the own-resources entry validates GitTargets and fails closed.
func installWebhookConfiguration(cs kubernetes.Interface, port int) error {
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName},
		Webhooks: []admissionv1.ValidatingWebhook{
			{
				Name:                    "watched.reverser.gitops.dev",
				ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To(base + "/validate/watched")},
				SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				FailurePolicy:           ptr.To(admissionv1.Ignore),
			},
			{
				Name:                    webhook.RecordedWebhookName,
				ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To(base + webhook.RecordedPath)},
				SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				FailurePolicy:           ptr.To(admissionv1.Ignore),
			},
			{
				Name:                    "reverser.gitops.dev",
				ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To(base + "/validate/reverser")},
				SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				FailurePolicy:           ptr.To(admissionv1.Fail),
				TimeoutSeconds:          ptr.To(int32(5)),
				Rules:                   webhook.OwnRules(),
				MatchConditions:         webhook.OwnMatchConditions(),
			},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		return err
	}
	mwc := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName},
		Webhooks:   []admissionv1.MutatingWebhook{webhook.RequesterWebhook(admissionv1.WebhookClientConfig{URL: ptr.To(base + webhook.RequesterPath)})},
	}
	_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), mwc, metav1.CreateOptions{})
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
