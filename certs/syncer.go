package certs

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// syncer keeps the certificate files of this replica equal to the Secret.
type syncer struct {
	reader client.Reader
	key    types.NamespacedName
	dir    string
	log    logr.Logger
	ready  func()
}

// setup registers the syncer as a controller that runs on every replica.
func (s *syncer) setup(mgr ctrl.Manager, own cache.Cache) error {
	everyReplica := false
	err := ctrl.NewControllerManagedBy(mgr).
		Named("webhook-cert-sync").
		WithOptions(controller.Options{NeedLeaderElection: &everyReplica, MaxConcurrentReconciles: 1}).
		WatchesRawSource(source.Kind(own, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		Complete(s)
	if err != nil {
		return fmt.Errorf("setting up the certificate file sync: %w", err)
	}
	return nil
}

// Reconcile copies the Secret's pair into the directory. A Secret that is missing or holds no
// usable pair is waited for: its next change triggers another reconcile.
func (s *syncer) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var sec corev1.Secret
	if err := s.reader.Get(ctx, s.key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			s.log.Info("waiting for the certificate Secret", "secret", s.key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading the certificate Secret %s: %w", s.key, err)
	}
	wrote, err := syncFiles(s.dir, sec.Data)
	if errors.Is(err, errNoKeyPair) {
		s.log.Info("the certificate Secret is not usable yet", "secret", s.key, "reason", err.Error())
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if wrote {
		s.log.Info("certificate files updated", "dir", s.dir, "serial", serialOf(sec.Data[corev1.TLSCertKey]))
	}
	s.ready()
	return ctrl.Result{}, nil
}

// serialOf is the serial number of a PEM certificate, for logs ("" when unreadable).
func serialOf(certPEM []byte) string {
	c, err := parseFirst(certPEM)
	if err != nil {
		return ""
	}
	return c.SerialNumber.Text(16)
}
