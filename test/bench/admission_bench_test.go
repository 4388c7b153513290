// Package bench measures the admission front door side by side in one run: decision
// latency over loopback TLS, and kubectl apply with and without the webhook registered.
// Run with `make bench` (it sets KUBEBUILDER_ASSETS and -benchtime=1x).
package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	regv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/config"
	"github.com/gitops-reverser/gitops-reverser/test/envtestsuite"
	"github.com/gitops-reverser/gitops-reverser/test/testcerts"
	"github.com/gitops-reverser/gitops-reverser/webhook"
)

const reviews = 10000

// BenchmarkAdmissionFrontDoor runs once (b.N is ignored) and reports p50/p99 of the
// decision round trip and the ratio of kubectl apply with/without the webhook.
func BenchmarkAdmissionFrontDoor(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("KUBEBUILDER_ASSETS not set; run `make bench`")
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fx := startFixture(b, ctx)

	lat := fx.reviewLatencies(b, reviews)
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")

	with, without := fx.applyTimes(b, 3, 8)
	ratio := float64(median(with)) / float64(median(without))
	b.ReportMetric(ratio, "apply-ratio")
	fmt.Printf("\nadmission: %d reviews over loopback TLS: p50 %s, p99 %s (goal p99 <= 2ms)\n", reviews, p50, p99)
	fmt.Printf("kubectl apply: median with webhook %s, without %s, ratio %.3f (goal <= 1.10)\n\n", median(with), median(without), ratio)
}

type fixture struct {
	env        *envtest.Environment
	client     client.Client
	url        string
	http       *http.Client
	kubeconfig string
	caBundle   []byte
}

func startFixture(b *testing.B, ctx context.Context) *fixture {
	b.Helper()
	crds, err := config.LoadCRDs()
	must(b, err)
	env := &envtest.Environment{CRDInstallOptions: envtest.CRDInstallOptions{CRDs: crds}}
	cfg, err := envtestsuite.Start(env)
	must(b, err)
	b.Cleanup(func() { _ = env.Stop() })

	dir := b.TempDir()
	ca, err := testcerts.WriteServing(dir)
	must(b, err)
	port := freePort(b)
	scheme := runtime.NewScheme()
	must(b, clientgoscheme.AddToScheme(scheme))
	must(b, v1alpha1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})})
	must(b, err)
	view := webhook.NewView(mgr.GetCache(), ctrl.Log)
	must(b, mgr.Add(view))
	mgr.GetWebhookServer().Register(webhook.WatchedPath, &admission.Webhook{Handler: &webhook.Watched{
		View: view, Sensitive: func(gr schema.GroupResource) bool { return gr.Resource == "secrets" && gr.Group == "" },
	}})
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() { <-done })

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(b, err)
	fx := &fixture{env: env, client: c, url: fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.WatchedPath), caBundle: ca}
	fx.http = tlsClient(ca)
	fx.createObjects(b, ctx)
	fx.kubeconfig = writeKubeconfig(b, env)
	// Wait until the view routes the sample object, so every review is a full decision.
	deadline := time.Now().Add(30 * time.Second)
	for len(view.Targets(ctx, sampleRequest(), labels.Set{}, nil)) == 0 {
		if time.Now().After(deadline) {
			b.Fatal("the view never routed the sample ConfigMap")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fx
}

func (fx *fixture) createObjects(b *testing.B, ctx context.Context) {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}},
		&v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "repo"}, Spec: v1alpha1.GitProviderSpec{URL: "file:///nowhere.git"}},
		&v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "live"},
			Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: "main", Path: "live"}},
		&v1alpha1.WatchRule{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "cms"},
			Spec: v1alpha1.WatchRuleSpec{TargetRef: v1alpha1.LocalObjectReference{Name: "live"},
				Rules: []v1alpha1.ResourceRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}}}}},
	}
	for _, o := range objs {
		must(b, fx.client.Create(ctx, o))
	}
}

func sampleRequest() webhook.Request {
	return webhook.Request{Operation: webhook.Create, Resource: schema.GroupResource{Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "bench", Name: "app"}
}

// reviewLatencies posts n dry-run AdmissionReviews and returns each round trip.
func (fx *fixture) reviewLatencies(b *testing.B, n int) []time.Duration {
	obj := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"bench","labels":{"app":"web"}},"data":{"k":"v"}}`)
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: types.UID(strconv.Itoa(i)), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "bench", Name: "app",
				Operation: admissionv1.Create, DryRun: ptr.To(true), Object: runtime.RawExtension{Raw: obj}}}
		body, err := json.Marshal(review)
		must(b, err)
		start := time.Now()
		resp, err := fx.http.Post(fx.url, "application/json", bytes.NewReader(body))
		must(b, err)
		var got admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&got)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		out = append(out, time.Since(start))
		must(b, err)
		if got.Response == nil || !got.Response.Allowed || len(got.Response.Warnings) == 0 {
			b.Fatalf("unexpected review response: %+v", got.Response)
		}
	}
	return out
}

// applyTimes times kubectl apply of one ConfigMap (a real update each time) in rounds
// alternating with and without the webhook registered.
func (fx *fixture) applyTimes(b *testing.B, rounds, perRound int) (with, without []time.Duration) {
	ctx := context.Background()
	seq := 0
	apply := func() time.Duration {
		seq++
		manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: bench\ndata:\n  seq: %q\n", strconv.Itoa(seq))
		cmd := exec.Command("kubectl", "--kubeconfig", fx.kubeconfig, "apply", "-f", "-")
		cmd.Stdin = bytes.NewBufferString(manifest)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		return d
	}
	apply() // warm up kubectl's discovery cache
	for r := 0; r < rounds; r++ {
		vwc := fx.webhookConfig()
		must(b, fx.client.Create(ctx, vwc))
		time.Sleep(2 * time.Second) // the API server picks up webhook configurations asynchronously
		for i := 0; i < perRound; i++ {
			with = append(with, apply())
		}
		must(b, fx.client.Delete(ctx, vwc))
		time.Sleep(2 * time.Second)
		for i := 0; i < perRound; i++ {
			without = append(without, apply())
		}
	}
	return with, without
}

func (fx *fixture) webhookConfig() *regv1.ValidatingWebhookConfiguration {
	return &regv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Webhooks: []regv1.ValidatingWebhook{{
			Name: webhook.WatchedWebhookName, ClientConfig: regv1.WebhookClientConfig{URL: ptr.To(fx.url), CABundle: fx.caBundle},
			SideEffects: ptr.To(regv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(regv1.Fail), TimeoutSeconds: ptr.To(int32(3)),
			Rules: []regv1.RuleWithOperations{{Operations: []regv1.OperationType{regv1.Create, regv1.Update},
				Rule: regv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
		}}}
}

func tlsClient(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 4}}
}

func writeKubeconfig(b *testing.B, env *envtest.Environment) string {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	must(b, err)
	kc, err := user.KubeConfig()
	must(b, err)
	p := filepath.Join(b.TempDir(), "kubeconfig")
	must(b, os.WriteFile(p, kc, 0o600))
	return p
}

func freePort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(b, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func percentile(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func median(d []time.Duration) time.Duration { return percentile(d, 50) }

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
