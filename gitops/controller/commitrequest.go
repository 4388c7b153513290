package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gitops-reverser/gitops-reverser/api/status"
	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// DefaultCommitRequestTimeout applies when spec.timeout is unset (the CRD defaults it too).
const DefaultCommitRequestTimeout = 60 * time.Second

// Requests is the part of batch.Manager the CommitRequest controller drives.
type Requests interface {
	Request(r batch.CommitRequest) (batch.RequestOutcome, error)
	Forget(key types.NamespacedName)
}

// CommitRequestReconciler hands CommitRequests to the writer and reports their outcome.
type CommitRequestReconciler struct {
	Client client.Client
	Writer Requests
	// Events carries the writer's "outcome known" notices into this controller.
	Events <-chan event.TypedGenericEvent[*v1alpha1.CommitRequest]
	// APIReader reads past the cache, to confirm a GitTarget the cache does not show before
	// a request ends TargetNotFound for good: created in the same apply, the target may not
	// have reached the cache yet. nil trusts the cache.
	APIReader client.Reader
}

// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=commitrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=reverser.gitops.dev,resources=commitrequests/status,verbs=get;update

// Reconcile fetches the request, defers the status patch and reconciles it with the writer.
func (r *CommitRequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var cr v1alpha1.CommitRequest
	if err := r.Client.Get(ctx, req.NamespacedName, &cr); err != nil {
		if apierrors.IsNotFound(err) {
			r.Writer.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if Settled(cr.Status.Conditions) {
		r.Writer.Forget(req.NamespacedName) // its outcome is in status for good
		return ctrl.Result{}, nil
	}
	before := cr.Status.DeepCopy()
	defer func() {
		if err == nil { // a generation a passing error kept from its verdict is not observed yet
			cr.Status.ObservedGeneration = cr.Generation
		}
		res, err = status.Finish(ctx, res, err, status.Patch(ctx, r.Client, &cr, before, &cr.Status))
	}()
	return r.reconcile(ctx, &cr)
}

func (r *CommitRequestReconciler) reconcile(ctx context.Context, cr *v1alpha1.CommitRequest) (ctrl.Result, error) {
	conds, gen := &cr.Status.Conditions, cr.Generation
	if cr.Spec.Requester == nil || cr.Spec.Requester.Username == "" {
		settle(cr, batch.RequestOutcome{Reason: v1alpha1.ReasonRequesterUnknown,
			Message: "spec.requester is empty: the admission webhook that records who asked did not run; create the request again once the webhook is installed"})
		return ctrl.Result{}, nil
	}
	targetKey := types.NamespacedName{Namespace: cr.Namespace, Name: cr.Spec.TargetRef.Name}
	// The writer first: what it knows of the request (a commit pushed, then the GitTarget
	// deleted before this status was written) stands over what the GitTarget is now.
	out, err := r.Writer.Request(batch.CommitRequest{
		Key: client.ObjectKeyFromObject(cr), UID: cr.UID, Target: targetKey, Author: cr.Spec.Requester.Username,
		Message: cr.Spec.Message, Deadline: cr.CreationTimestamp.Add(timeout(cr)), Created: cr.CreationTimestamp.Time,
		Claimed: r.claimedBesides(cr),
	})
	if errors.Is(err, batch.ErrTargetNotRegistered) {
		return r.unregistered(ctx, cr, targetKey, errors.Is(err, batch.ErrRecovering))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !out.Done {
		reason, msg := v1alpha1.ReasonWaiting, fmt.Sprintf("waiting for changes by %s on GitTarget %s to commit", cr.Spec.Requester.Username, targetKey)
		if out.Reason != "" {
			reason, msg = out.Reason, out.Message // e.g. Retrying: the commit failed and is retried
		}
		v1alpha1.SetReconciling(conds, gen, reason, msg)
		v1alpha1.SetCondition(conds, gen, v1alpha1.ConditionCommitted, false, reason, msg)
		// The writer's notice normally brings the outcome; this bounds the wait if none
		// comes (the request is still being pushed at its deadline, say).
		return ctrl.Result{RequeueAfter: recheckAfter(cr.CreationTimestamp.Add(timeout(cr)))}, nil
	}
	settle(cr, out)
	return ctrl.Result{}, nil
}

// unregistered is the status of a request whose GitTarget the writer has not registered:
// settled when the GitTarget is gone or being deleted, or when it did not become Ready in
// time; otherwise waiting, re-checked every two seconds. recovering says the writer looks
// first on the branch for a commit an earlier process made with the message.
func (r *CommitRequestReconciler) unregistered(ctx context.Context, cr *v1alpha1.CommitRequest, targetKey types.NamespacedName, recovering bool) (ctrl.Result, error) {
	conds, gen := &cr.Status.Conditions, cr.Generation
	var t v1alpha1.GitTarget
	if err := r.getTarget(ctx, targetKey, &t); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		settle(cr, batch.RequestOutcome{Reason: v1alpha1.ReasonTargetNotFound,
			Message: fmt.Sprintf("GitTarget %s not found; the message was not used", targetKey)})
		return ctrl.Result{}, nil
	}
	if !t.DeletionTimestamp.IsZero() { // never registered again: no look on its branch either
		settle(cr, batch.RequestOutcome{Reason: batch.ReasonTargetRemoved,
			Message: fmt.Sprintf("GitTarget %s is being deleted; the message was not used", targetKey)})
		return ctrl.Result{}, nil
	}
	// A request an earlier leader may have committed waits for the look on the branch.
	if time.Now().After(cr.CreationTimestamp.Add(timeout(cr))) && !recovering {
		msg := fmt.Sprintf("GitTarget %s did not become Ready within the timeout; the message was not used", targetKey)
		if apimeta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionReady) {
			// Ready as last written, by a process that is gone: a restart or a new leader,
			// whose writer has not registered the target yet.
			msg = fmt.Sprintf("the operator restarted (or another replica took over) and had not registered GitTarget %s again "+
				"in time, so the message was not used; changes made before are committed by its initial snapshot, "+
				"under the committer", targetKey)
		}
		settle(cr, batch.RequestOutcome{Reason: batch.ReasonTimedOut, Message: msg})
		return ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("waiting for GitTarget %s to be Ready", targetKey)
	if recovering {
		msg = fmt.Sprintf("waiting for the operator, which took over after the request was made, to register GitTarget %s "+
			"and look on its branch for a commit an earlier process made with the message", targetKey)
	}
	v1alpha1.SetReconciling(conds, gen, v1alpha1.ReasonWaiting, msg)
	v1alpha1.SetCondition(conds, gen, v1alpha1.ConditionCommitted, false, v1alpha1.ReasonWaiting, msg)
	return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
}

// claimedBesides lists, when the writer asks, the commits the other CommitRequests of cr's
// GitTarget by the same requester report as theirs, and those of them not settled yet,
// by request, with their messages: a commit carries a message once per request it was
// made for, so one found on the branch after a restart with cr's message is not cr's when
// the requests reporting it (a pipeline's previous run) already take each copy, or when
// it is the first made since a request still waiting was created. Read from the cache; a
// failed list is returned, and the writer looks again.
func (r *CommitRequestReconciler) claimedBesides(cr *v1alpha1.CommitRequest) func() (map[types.NamespacedName]batch.Claim, error) {
	ns, target, uid := cr.Namespace, cr.Spec.TargetRef.Name, cr.UID
	requester := cr.Spec.Requester.Username
	return func() (map[types.NamespacedName]batch.Claim, error) {
		var list v1alpha1.CommitRequestList
		if err := r.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing the CommitRequests of namespace %s: %w", ns, err)
		}
		claimed := map[types.NamespacedName]batch.Claim{}
		for i := range list.Items {
			o := &list.Items[i]
			if o.UID == uid || o.Spec.TargetRef.Name != target || o.Spec.Requester == nil || o.Spec.Requester.Username != requester {
				continue
			}
			switch {
			case o.Status.SHA != "":
				claimed[client.ObjectKeyFromObject(o)] = batch.Claim{SHA: o.Status.SHA, Message: o.Spec.Message}
			case !Settled(o.Status.Conditions):
				claimed[client.ObjectKeyFromObject(o)] = batch.Claim{Message: o.Spec.Message, Created: o.CreationTimestamp.Time}
			}
		}
		return claimed, nil
	}
}

// getTarget reads the GitTarget from the cache, and a NotFound again from the API server
// (APIReader), since it is final for the request.
func (r *CommitRequestReconciler) getTarget(ctx context.Context, key types.NamespacedName, t *v1alpha1.GitTarget) error {
	err := r.Client.Get(ctx, key, t)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, t)
	}
	return err
}

// recheckAfter is how long to wait before asking the writer again: until the deadline,
// then every 30 s while a commit carrying the message is still being pushed.
func recheckAfter(deadline time.Time) time.Duration {
	if wait := time.Until(deadline); wait > time.Second {
		return wait
	}
	return 30 * time.Second
}

// timeout is spec.timeout or its default (for a request stored before the CRD defaulted
// it). 0s waits for nothing: only a window already open takes the message.
func timeout(cr *v1alpha1.CommitRequest) time.Duration {
	if cr.Spec.Timeout != nil && cr.Spec.Timeout.Duration >= 0 {
		return cr.Spec.Timeout.Duration
	}
	return DefaultCommitRequestTimeout
}

// settle writes a final outcome: Committed True with the SHA and Ready, or Committed False
// with the reason (Stalled: only a new request can help).
func settle(cr *v1alpha1.CommitRequest, out batch.RequestOutcome) {
	conds, gen := &cr.Status.Conditions, cr.Generation
	if out.SHA != "" {
		cr.Status.SHA = out.SHA
		v1alpha1.SetCondition(conds, gen, v1alpha1.ConditionCommitted, true, out.Reason, out.Message)
		v1alpha1.SetReady(conds, gen, out.Reason, out.Message)
		return
	}
	v1alpha1.SetCondition(conds, gen, v1alpha1.ConditionCommitted, false, out.Reason, out.Message)
	v1alpha1.SetStalled(conds, gen, out.Reason, out.Message)
}

// Settled reports whether a CommitRequest's outcome is final: Committed True, or False for
// any reason but waiting, retrying (the commit carrying the message failed to push and is
// retried with it) and waiting on a Stalled target's folder.
func Settled(conds []metav1.Condition) bool {
	c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionCommitted)
	return c != nil && c.Reason != v1alpha1.ReasonWaiting && c.Reason != batch.ReasonRetrying && c.Reason != batch.ReasonTargetStalled
}

// SetupWithManager registers the controller (leader only, next to the writer).
func (r *CommitRequestReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.CommitRequest{}).
		WithOptions(controller.Options{RateLimiter: status.RetryLimiter()})
	if r.Events != nil {
		b = b.WatchesRawSource(source.Channel(r.Events, &handler.TypedEnqueueRequestForObject[*v1alpha1.CommitRequest]{}))
	}
	return b.Complete(r)
}
