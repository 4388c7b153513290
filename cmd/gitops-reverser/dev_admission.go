package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gitops-reverser/gitops-reverser/certs"
	"github.com/gitops-reverser/gitops-reverser/webhook"
)

const devNamespace = "gitops-reverser-system"

// devOperator prepares what an install provides: the operator's namespace, its own user
// (its writes skip the webhook, as in a cluster) and the webhook configuration pointing at
// 127.0.0.1. It returns the operator's rest config and options.
func devOperator(ctx context.Context, env *envtest.Environment, c client.Client, dir string) (*rest.Config, Options, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "gitops-reverser", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, Options{}, err
	}
	port, err := devFreePort()
	if err != nil {
		return nil, Options{}, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}}); err != nil {
		return nil, Options{}, err
	}
	if err := c.Create(ctx, devWebhookConfiguration(port)); err != nil {
		return nil, Options{}, fmt.Errorf("registering the webhooks: %w", err)
	}
	if err := c.Create(ctx, devMutatingWebhookConfiguration(port)); err != nil {
		return nil, Options{}, fmt.Errorf("registering the requester webhook: %w", err)
	}
	opts := Options{
		MetricsAddr: "0", ProbeAddr: "0", WorkDir: filepath.Join(dir, "clones"),
		GitPollInterval: 10 * time.Second, ProviderCheckInterval: time.Minute,
		Namespace: devNamespace, WebhookHost: "127.0.0.1", WebhookPort: port, WebhookCertDir: filepath.Join(dir, "certs"),
		WebhookConfigName: "gitops-reverser", MutatingWebhookConfigName: "gitops-reverser", WebhookFailure: string(admissionv1.Ignore), WebhookTimeout: 3,
		WebhookSkipUsers: defaultSkipUsers(), WebhookSkipManagers: defaultSkipFieldManagers(),
		Certs: certs.Options{Mode: certs.ModeSelfManaged, SecretName: "gitops-reverser-webhook-tls", ServiceName: "gitops-reverser-webhook", ExtraIPs: []net.IP{net.ParseIP("127.0.0.1")}},
	}
	return user.Config(), opts, nil
}

func devWebhookConfiguration(port int) *admissionv1.ValidatingWebhookConfiguration {
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	entry := func(name, path string, policy admissionv1.FailurePolicyType) admissionv1.ValidatingWebhook {
		return admissionv1.ValidatingWebhook{Name: name, ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To(base + path)},
			SideEffects: ptr.To(admissionv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(policy)}
	}
	own := entry("reverser.gitops.dev", webhook.OwnPath, admissionv1.Fail)
	own.Rules, own.MatchConditions = webhook.OwnRules(), webhook.OwnMatchConditions()
	return &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gitops-reverser"},
		Webhooks: []admissionv1.ValidatingWebhook{entry(webhook.WatchedWebhookName, webhook.WatchedPath, admissionv1.Ignore), own}}
}

func devMutatingWebhookConfiguration(port int) *admissionv1.MutatingWebhookConfiguration {
	url := "https://127.0.0.1:" + strconv.Itoa(port) + webhook.RequesterPath
	return &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gitops-reverser"},
		Webhooks: []admissionv1.MutatingWebhook{webhook.RequesterWebhook(admissionv1.WebhookClientConfig{URL: &url})}}
}

// waitWatchedRules waits until the operator has put the WatchRule's resources into the
// watched-objects webhook, and the API server has had a moment to load it: a change made
// before is not judged, and its commit is not credited to the user who made it.
func waitWatchedRules(ctx context.Context, c client.Client) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var vwc admissionv1.ValidatingWebhookConfiguration
		if err := c.Get(ctx, types.NamespacedName{Name: "gitops-reverser"}, &vwc); err != nil {
			return err
		}
		for _, wh := range vwc.Webhooks {
			if wh.Name == webhook.WatchedWebhookName && slices.ContainsFunc(wh.Rules, func(r admissionv1.RuleWithOperations) bool {
				return slices.Contains(r.Resources, "configmaps")
			}) {
				time.Sleep(time.Second) // the API server picks up the new configuration asynchronously
				return nil
			}
		}
	}
	return errors.New("the operator did not add the WatchRule's resources to its webhook within 60s")
}

// waitCABundle waits until the operator injected its CA into the webhook configuration.
func waitCABundle(ctx context.Context, c client.Client) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var vwc admissionv1.ValidatingWebhookConfiguration
		if err := c.Get(ctx, types.NamespacedName{Name: "gitops-reverser"}, &vwc); err != nil {
			return err
		}
		var mwc admissionv1.MutatingWebhookConfiguration
		if err := c.Get(ctx, types.NamespacedName{Name: "gitops-reverser"}, &mwc); err != nil {
			return err
		}
		if len(vwc.Webhooks) == 2 && len(vwc.Webhooks[0].ClientConfig.CABundle) > 0 && len(vwc.Webhooks[1].ClientConfig.CABundle) > 0 &&
			len(mwc.Webhooks) == 1 && len(mwc.Webhooks[0].ClientConfig.CABundle) > 0 {
			time.Sleep(time.Second) // the API server picks up the new configuration asynchronously
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("the operator did not inject its CA into the webhook configuration within 60s")
}

// devAdmission shows the front door: a Secret that would land in plaintext is refused on
// --dry-run=server, and an allowed dry-run says where the object would land.
func devAdmission(ctx context.Context, c client.Client, warnings *warningRecorder) error {
	step("kubectl -n demo create secret generic db --from-literal=password=... --dry-run=server")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db"}, StringData: map[string]string{"password": "s3cret"}}
	err := c.Create(ctx, secret, client.DryRunAll)
	switch {
	case err == nil:
		return errors.New("the webhook did not deny a plaintext Secret")
	case !apierrors.IsForbidden(err): // a denial; anything else is the demo failing
		return fmt.Errorf("creating Secret demo/db with --dry-run=server: %w", err)
	}
	fmt.Printf("    denied: %v\n", err)
	step("kubectl -n demo create configmap feature-flags --dry-run=server")
	warnings.reset()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "feature-flags"}, Data: map[string]string{"beta": "on"}}
	if err := c.Create(ctx, cm, client.DryRunAll); err != nil {
		return err
	}
	fmt.Printf("    allowed, Warning: %s\n", strings.Join(warnings.all(), "; "))
	return nil
}

// warningRecorder keeps the API server's warnings (where an object would land).
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = nil
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

func devFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
