// Package status writes the status of this operator's objects the same way in every
// reconciler: only when it changed, guarded by the resourceVersion read, and with the
// reconcile's result and error combined as controller-runtime expects.
package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ConflictRetry is how soon a reconcile whose status write met a newer object runs again.
const ConflictRetry = 100 * time.Millisecond

// Patch writes obj's status only when it changed (before and after are the status as read
// and as reconciled). The write carries the resourceVersion read, so a reconcile that
// started from a stale cache cannot overwrite a newer status (a CommitRequest's outcome is
// written once).
func Patch(ctx context.Context, c client.Client, obj client.Object, before, after any) error {
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	if err := c.Status().Update(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// Finish combines a reconcile's outcome with its deferred status write.
// controller-runtime ignores a result returned with an error (and logs a warning), so an
// error comes back alone. A conflict on the status write only means the reconcile read an
// object the cache had not caught up with (the writer's status notices can arrive before
// the watch does): it runs again shortly from the newer object, without an error log.
func Finish(ctx context.Context, res ctrl.Result, err, statusErr error) (ctrl.Result, error) {
	if err == nil && apierrors.IsConflict(statusErr) {
		logf.FromContext(ctx).V(1).Info("status write met a newer object; reconciling again", "after", ConflictRetry)
		return ctrl.Result{RequeueAfter: ConflictRetry}, nil
	}
	if err = errors.Join(err, statusErr); err != nil {
		return ctrl.Result{}, err
	}
	return res, nil
}

// OwnChanges passes the events of a reconciler's own objects that can change its verdict:
// creation, deletion, updates of the spec (a new generation), labels or annotations, and
// status updates that change what a condition says (one added or gone, another status or
// reason). It leaves out status updates that change only messages, times or counts, which
// are this operator's own writes: each would run the object's reconcile again at once, past
// its backoff, and a message that differs at every attempt would make it reconcile in a
// loop. A verdict write is passed so that a reconcile that read an older verdict from the
// cache, computed that one again and so wrote nothing, runs once more from the new one.
func OwnChanges() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{}, verdictChanged())
}

// conditioned is an object with kstatus conditions (every kind of this API).
type conditioned interface {
	GetConditions() []metav1.Condition
}

// verdictChanged passes updates whose conditions say something else (sameVerdicts), and
// those of objects without conditions.
func verdictChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok := e.ObjectOld.(conditioned)
		after, ok2 := e.ObjectNew.(conditioned)
		return !ok || !ok2 || !sameVerdicts(before.GetConditions(), after.GetConditions())
	}}
}

// sameVerdicts reports whether a and b hold the same condition types with the same status
// and reason, whatever their messages and times. Pure.
func sameVerdicts(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		d := apimeta.FindStatusCondition(b, c.Type)
		if d == nil || d.Status != c.Status || d.Reason != c.Reason {
			return false
		}
	}
	return true
}
