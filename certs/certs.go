// Package certs provides the admission webhook's serving certificate.
//
// In self-managed mode the leader is its own CA: it keeps a CA and an ECDSA serving
// certificate in one kubernetes.io/tls Secret, renews them before they expire and writes the
// CA bundle into the webhook configurations. In cert-manager mode cert-manager does all that.
// In both modes every replica copies the Secret's tls.crt and tls.key into the webhook
// server's certificate directory, where controller-runtime's certwatcher reloads them, so
// rotated certificates are served without a restart.
package certs

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Certs provides the webhook serving certificate of one operator replica.
type Certs struct {
	opts  Options
	ready chan struct{}
	once  sync.Once
}

// New checks the options and fills defaults. Call SetupWithManager once to start the work.
func New(opts Options) (*Certs, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Certs{opts: opts, ready: make(chan struct{})}, nil
}

// SetupWithManager adds the runnables to mgr: on every replica, a watch of the one Secret that
// keeps the certificate files equal to it; in self-managed mode, on the leader only, the
// issuer that creates, renews and injects the certificate. The Secret is watched through a
// cache of its own, restricted to that Secret, so the manager's cache is left as it is.
func (c *Certs) SetupWithManager(mgr ctrl.Manager) error {
	log := c.opts.Log
	if log.GetSink() == nil {
		log = mgr.GetLogger().WithName("certs")
	}
	key := types.NamespacedName{Namespace: c.opts.Namespace, Name: c.opts.SecretName}
	own, err := newCache(mgr, key)
	if err != nil {
		return err
	}
	if err := mgr.Add(everyReplica{own}); err != nil {
		return fmt.Errorf("adding the certificate cache: %w", err)
	}
	s := &syncer{reader: own, key: key, dir: c.opts.CertDir, log: log.WithName("sync"), ready: c.markReady}
	if err := s.setup(mgr, own); err != nil {
		return err
	}
	if c.opts.Mode != ModeSelfManaged {
		return nil
	}
	i := &issuer{
		api:      mgr.GetAPIReader(),
		client:   mgr.GetClient(),
		key:      key,
		webhooks: c.opts.WebhookConfigurations,
		mutating: c.opts.MutatingWebhookConfigurations,
		policy:   c.opts.policy(),
		log:      log.WithName("issuer"),
	}
	return i.setup(mgr, own)
}

// WaitReady blocks until the certificate files have been written from the Secret once, so
// that the webhook server never starts without a certificate; it fails when ctx ends first.
func (c *Certs) WaitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the webhook serving certificate: %w", ctx.Err())
	}
}

// GatedServer wraps the webhook server so that it starts only once WaitReady returns.
// Pass the result as ctrl.Options.WebhookServer: controller-runtime starts webhook servers
// before anything else, and a server without its certificate files would fail at once.
func (c *Certs) GatedServer(s webhook.Server) webhook.Server {
	return &gatedServer{Server: s, certs: c}
}

// markReady records that the certificate files exist.
func (c *Certs) markReady() {
	c.once.Do(func() { close(c.ready) })
}

// gatedServer is a webhook.Server whose Start waits for the certificate files.
type gatedServer struct {
	webhook.Server
	certs *Certs
}

// Start serves once the certificate files exist; stopping before that is not an error.
func (g *gatedServer) Start(ctx context.Context) error {
	if err := g.certs.WaitReady(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return g.Server.Start(ctx)
}

// newCache builds a cache that holds only the certificate Secret (and, when the issuer asks
// for them, the webhook configurations), without managed fields.
func newCache(mgr ctrl.Manager, key types.NamespacedName) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{key.Namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", key.Name),
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the certificate cache: %w", err)
	}
	return c, nil
}

// everyReplica runs a cache on every replica: the manager would otherwise start a plain
// runnable on the leader only.
type everyReplica struct{ cache.Cache }

// NeedLeaderElection is false: every replica serves the webhook and needs the certificate.
func (everyReplica) NeedLeaderElection() bool { return false }
