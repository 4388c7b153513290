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

// WatchRuleReconciler registers a WatchRule's claims on its namespace with the watcher.
type WatchRuleReconciler struct {
	Client client.Client
	// Discovery is shared with the other rule reconciler (NewDiscovery).
	Discovery *Discovery
	Registry  Registry
}

// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=watchrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=watchrules/status,verbs=get;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=*,resources=*,verbs=get;list;watch

// Reconcile fetches the rule, defers the status patch and registers its claims.
func (r *WatchRuleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	defer func() {
		if err == nil {
			res = r.Discovery.crds.recheck(res, time.Now())
		}
	}()
	key := watcher.RuleKey("WatchRule", req.Namespace, req.Name)
	var wr v1alpha1.WatchRule
	if err := r.Client.Get(ctx, req.NamespacedName, &wr); err != nil {
		if apierrors.IsNotFound(err) {
			r.Registry.ForgetRule(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := wr.Status.DeepCopy()
	defer func() {
		if err == nil { // a generation a passing error kept from its verdict is not observed yet
			wr.Status.ObservedGeneration = wr.Generation
		}
		res, err = status.Finish(ctx, res, err, status.Patch(ctx, r.Client, &wr, before, &wr.Status))
	}()

	target := types.NamespacedName{Namespace: wr.Namespace, Name: wr.Spec.TargetRef.Name}
	var gt v1alpha1.GitTarget
	if err := r.Client.Get(ctx, target, &gt); err != nil || !gt.DeletionTimestamp.IsZero() {
		if err == nil || apierrors.IsNotFound(err) {
			r.Registry.SetRule(key, nil)
			watchesNothing(&wr.Status, wr.Generation, v1alpha1.ReasonTargetNotFound, targetMissing(target, err))
			return ctrl.Result{}, nil
		}
		notWatchingYet(&wr.Status, wr.Generation, r.Registry, key, err)
		return ctrl.Result{}, err
	}
	registered := r.Registry.Claims(key)
	lists, failed, err := r.Discovery.preferredFor(time.Now(), registered)
	if err != nil {
		notWatchingYet(&wr.Status, wr.Generation, r.Registry, key, err)
		return ctrl.Result{}, err
	}
	d := discovered{lists: lists, failed: failed, undiscovered: undiscovered(registered, failed)}
	var all compiled
	for _, rule := range wr.Spec.Rules {
		c, err := claimsFor(target, wr.Namespace, rule, nil, d, false)
		if err != nil {
			r.Registry.SetRule(key, nil)
			watchesNothing(&wr.Status, wr.Generation, v1alpha1.ReasonInvalidRule, err.Error())
			return ctrl.Result{}, nil
		}
		all.add(c)
	}
	register(r.Registry, key, target, all)
	return applyResult(&wr.Status, wr.Generation, all, keptMessage(all.claims, failed), listingOf(r.Registry, all.claims)), nil
}

// SetupWithManager watches rules, their targets and CRDs.
func (r *WatchRuleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.WatchRule{}, builder.WithPredicates(status.OwnChanges())).
		Watches(&v1alpha1.GitTarget{}, handler.EnqueueRequestsFromMapFunc(r.rulesInNamespace), targetExistence()).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, crdEvents(r.all, r.Discovery), builder.OnlyMetadata).
		WithOptions(controller.Options{RateLimiter: status.RetryLimiter()}).
		Complete(r)
}

func (r *WatchRuleReconciler) rulesInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.list(ctx, client.InNamespace(o.GetNamespace()))
}

func (r *WatchRuleReconciler) all(ctx context.Context) []reconcile.Request { return r.list(ctx) }

func (r *WatchRuleReconciler) list(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list v1alpha1.WatchRuleList
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, w := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&w)})
	}
	return reqs
}
