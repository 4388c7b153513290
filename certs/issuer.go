package certs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gitops-reverser/gitops-reverser/gitops/redact"
)

// errLostRace reports that another writer changed the Secret or a webhook configuration
// between our read and our write (two replicas around a leader change); we read again.
var errLostRace = errors.New("another writer changed it first")

// raceRetry is how soon a reconcile that lost a race reads again.
const raceRetry = 200 * time.Millisecond

// managedByLabel marks the Secret the self-managed issuer created.
const managedByLabel = "app.kubernetes.io/managed-by"

// keyMaterialLabel marks the Secret as key material, which the writer never puts in Git,
// whichever rule routes it (batch.KeyMaterialLabel; the certs package does not import the
// writer): its CA key and serving key would let anyone who reads the repository's
// recipients pass as a replica, or issue certificates the API server trusts.
const keyMaterialLabel = "reverser.gitops.dev/key-material"

// issuer creates and renews the self-managed Secret and injects its CA bundle. It runs on the
// leader only.
type issuer struct {
	api      client.Reader // uncached: every decision sees what was written last
	client   client.Client
	key      types.NamespacedName
	webhooks []string
	// mutating are the MutatingWebhookConfigurations to inject into.
	mutating []string
	policy   renewalPolicy
	log      logr.Logger
}

// setup registers the issuer as a leader-only controller, triggered at start, by changes of
// the Secret and by changes of the named webhook configurations.
func (i *issuer) setup(mgr ctrl.Manager, own cache.Cache) error {
	leaderOnly := true
	toSecret := handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *admissionregistrationv1.ValidatingWebhookConfiguration) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: i.key}}
	})
	named := predicate.NewTypedPredicateFuncs(func(v *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
		return slices.Contains(i.webhooks, v.Name)
	})
	mutatingToSecret := handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *admissionregistrationv1.MutatingWebhookConfiguration) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: i.key}}
	})
	mutatingNamed := predicate.NewTypedPredicateFuncs(func(v *admissionregistrationv1.MutatingWebhookConfiguration) bool {
		return slices.Contains(i.mutating, v.Name)
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("webhook-cert-issuer").
		WithOptions(controller.Options{NeedLeaderElection: &leaderOnly, MaxConcurrentReconciles: 1}).
		WatchesRawSource(source.Func(i.enqueueOnce)).
		WatchesRawSource(source.Kind(own, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		WatchesRawSource(source.Kind(own, &admissionregistrationv1.ValidatingWebhookConfiguration{}, toSecret, named)).
		WatchesRawSource(source.Kind(own, &admissionregistrationv1.MutatingWebhookConfiguration{}, mutatingToSecret, mutatingNamed)).
		Complete(i)
	if err != nil {
		return fmt.Errorf("setting up the certificate issuer: %w", err)
	}
	return nil
}

// enqueueOnce starts a reconcile even when neither the Secret nor a configuration exists.
func (i *issuer) enqueueOnce(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	q.Add(reconcile.Request{NamespacedName: i.key})
	return nil
}

// Reconcile applies the plan for the Secret, writes the CA bundle into the webhook
// configurations and comes back when the next renewal is due.
func (i *issuer) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	sec, err := i.read(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	data := secretData(sec)
	now := time.Now()
	plan := i.policy.decide(data, now)
	renewed := plan.NewCA || plan.NewCert // and labelled (write)
	if renewed {
		if data, err = i.renew(ctx, sec, plan, now); err != nil {
			return i.retryOnRace(err)
		}
		plan = i.policy.decide(data, time.Now())
	} else if plan.Reason != "" {
		i.log.Info("renewal postponed", "reason", plan.Reason, "recheckAfter", plan.RecheckAfter)
	}
	if err := i.inject(ctx, data[keyCACert]); err != nil {
		return i.retryOnRace(err)
	}
	if sec != nil && !renewed && sec.Labels[keyMaterialLabel] == "" {
		// Made by a release before the label: labelled now, not at its next renewal. Best
		// effort (an immutable Secret, a policy that refuses it): never in the way of serving.
		if err := i.write(ctx, sec, sec.Data); err != nil {
			i.log.Info("could not label the certificate Secret as key material; a rule that captures it would "+
				"write it to Git, encrypted: label it "+keyMaterialLabel+" yourself", "secret", i.key, "reason", err.Error())
		}
	}
	return ctrl.Result{RequeueAfter: max(plan.RecheckAfter, minRecheck)}, nil
}

// retryOnRace turns a lost race into a quick re-read instead of an error.
func (i *issuer) retryOnRace(err error) (ctrl.Result, error) {
	if errors.Is(err, errLostRace) {
		i.log.Info("lost a write race; reading again", "reason", err.Error())
		return ctrl.Result{RequeueAfter: raceRetry}, nil
	}
	return ctrl.Result{}, err
}

// read returns the Secret, or nil when it does not exist yet.
func (i *issuer) read(ctx context.Context) (*corev1.Secret, error) {
	var sec corev1.Secret
	if err := i.api.Get(ctx, i.key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the certificate Secret %s: %w", i.key, err)
	}
	return &sec, nil
}

// renew carries out the plan and stores the result, returning the data now in the Secret.
func (i *issuer) renew(ctx context.Context, sec *corev1.Secret, plan step, now time.Time) (map[string][]byte, error) {
	data, err := i.policy.apply(plan, secretData(sec), now)
	if err != nil {
		return nil, err
	}
	if err := i.write(ctx, sec, data); err != nil {
		return nil, err
	}
	i.log.Info("certificate renewed", "secret", i.key, "newCA", plan.NewCA, "newCert", plan.NewCert,
		"reason", plan.Reason, "serial", serialOf(data[corev1.TLSCertKey]))
	return data, nil
}

// write creates or updates the Secret; an existing Secret is updated only at the version read,
// so two replicas never overwrite each other's certificate unknowingly.
func (i *issuer) write(ctx context.Context, sec *corev1.Secret, data map[string][]byte) error {
	if sec == nil {
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: i.key.Namespace, Name: i.key.Name,
				Labels: map[string]string{managedByLabel: "gitops-reverser", keyMaterialLabel: "webhook-certificate"}},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}
		// The Secret holds the CA's and the server's private keys: a policy refusing it may
		// quote them in its message.
		if err := redact.SecretValues(i.client.Create(ctx, sec), data); err != nil {
			return raceOr(err, "creating the certificate Secret")
		}
		return nil
	}
	held := make(map[string][]byte, len(data)+len(sec.Data)) // a policy's message may quote the Secret as it was, too
	maps.Copy(held, data)
	for k, v := range sec.Data {
		held["old:"+k] = v
	}
	sec = sec.DeepCopy()
	sec.Data = data
	metav1.SetMetaDataLabel(&sec.ObjectMeta, keyMaterialLabel, "webhook-certificate") // one made before the label had none
	if err := redact.SecretValues(i.client.Update(ctx, sec), held); err != nil {
		return raceOr(err, "updating the certificate Secret")
	}
	return nil
}

// inject writes bundle into the caBundle of every webhook of the named configurations that
// lacks it, leaving everything else as it is. A configuration that does not exist yet is
// skipped: its creation triggers another reconcile.
func (i *issuer) inject(ctx context.Context, bundle []byte) error {
	for _, name := range i.webhooks {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := i.injectInto(ctx, name, &vwc, func() []webhookCA { return validatingCAs(&vwc) }, bundle); err != nil {
			return err
		}
	}
	for _, name := range i.mutating {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := i.injectInto(ctx, name, &mwc, func() []webhookCA { return mutatingCAs(&mwc) }, bundle); err != nil {
			return err
		}
	}
	return nil
}

// injectInto reads one configuration into obj and patches the caBundle of its entries.
func (i *issuer) injectInto(ctx context.Context, name string, obj client.Object, hooks func() []webhookCA, bundle []byte) error {
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if err := i.api.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			i.log.V(1).Info("webhook configuration not found yet", "kind", kind, "name", name)
			return nil
		}
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	patch, needed, err := caBundlePatch(hooks(), bundle)
	if err != nil || !needed {
		return err
	}
	if err := i.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		if apierrors.IsInvalid(err) { // a failed name test: the list changed since our read
			err = fmt.Errorf("%w: %w", errLostRace, err)
		}
		return fmt.Errorf("injecting the CA bundle into %s %s: %w", kind, name, err)
	}
	i.log.Info("CA bundle injected", "kind", kind, "name", name)
	return nil
}

// raceOr wraps err as errLostRace when the API server refused the write because the object
// changed or appeared meanwhile.
func raceOr(err error, doing string) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: %w: %w", doing, errLostRace, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// secretData is the Secret's data, nil for a missing Secret.
func secretData(sec *corev1.Secret) map[string][]byte {
	if sec == nil {
		return nil
	}
	return sec.Data
}
