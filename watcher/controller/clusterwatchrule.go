package controller

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitops-reverser/gitops-reverser/api/status"
	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/watcher"
)

// ClusterWatchRuleReconciler registers a ClusterWatchRule's claims with the watcher.
type ClusterWatchRuleReconciler struct {
	Client client.Client
	// Discovery is shared with the other rule reconciler (NewDiscovery).
	Discovery *Discovery
	Registry  Registry
}

// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=clusterwatchrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=clusterwatchrules/status,verbs=get;update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile fetches the rule, defers the status patch and registers its claims.
func (r *ClusterWatchRuleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	defer func() {
		if err == nil {
			res = r.Discovery.crds.recheck(res, time.Now())
		}
	}()
	key := watcher.RuleKey("ClusterWatchRule", "", req.Name)
	var cr v1alpha1.ClusterWatchRule
	if err := r.Client.Get(ctx, req.NamespacedName, &cr); err != nil {
		if apierrors.IsNotFound(err) {
			r.Registry.ForgetRule(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := cr.Status.DeepCopy()
	defer func() {
		if err == nil { // a generation a passing error kept from its verdict is not observed yet
			cr.Status.ObservedGeneration = cr.Generation
		}
		res, err = status.Finish(ctx, res, err, status.Patch(ctx, r.Client, &cr, before, &cr.Status))
	}()

	target := types.NamespacedName{Namespace: cr.Spec.TargetRef.Namespace, Name: cr.Spec.TargetRef.Name}
	var gt v1alpha1.GitTarget
	if err := r.Client.Get(ctx, target, &gt); err != nil || !gt.DeletionTimestamp.IsZero() {
		if err == nil || apierrors.IsNotFound(err) {
			r.Registry.SetRule(key, nil)
			watchesNothing(&cr.Status, cr.Generation, v1alpha1.ReasonTargetNotFound, targetMissing(target, err))
			return ctrl.Result{}, nil
		}
		notWatchingYet(&cr.Status, cr.Generation, r.Registry, key, err)
		return ctrl.Result{}, err
	}
	registered := r.Registry.Claims(key)
	lists, failed, err := r.Discovery.preferredFor(time.Now(), registered)
	if err != nil {
		notWatchingYet(&cr.Status, cr.Generation, r.Registry, key, err)
		return ctrl.Result{}, err
	}
	d := discovered{lists: lists, failed: failed, undiscovered: undiscovered(registered, failed)}
	var all compiled
	for _, rule := range cr.Spec.Rules {
		c, err := claimsFor(target, "", rule.ResourceRule, rule.NamespaceSelector, d, true)
		if err != nil {
			r.Registry.SetRule(key, nil)
			watchesNothing(&cr.Status, cr.Generation, v1alpha1.ReasonInvalidRule, err.Error())
			return ctrl.Result{}, nil
		}
		all.add(c)
	}
	register(r.Registry, key, target, all)
	return applyResult(&cr.Status, cr.Generation, all, keptMessage(all.claims, failed), listingOf(r.Registry, all.claims)), nil
}

// SetupWithManager watches rules, targets and CRDs.
func (r *ClusterWatchRuleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ClusterWatchRule{}, builder.WithPredicates(status.OwnChanges())).
		Watches(&v1alpha1.GitTarget{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return r.all(ctx)
		}), targetExistence()).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, crdEvents(r.all, r.Discovery), builder.OnlyMetadata).
		WithOptions(controller.Options{RateLimiter: status.RetryLimiter()}).
		Complete(r)
}

func (r *ClusterWatchRuleReconciler) all(ctx context.Context) []reconcile.Request {
	var list v1alpha1.ClusterWatchRuleList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	return reqs
}
