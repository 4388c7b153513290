package status

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestFinish(t *testing.T) {
	conflict := fmt.Errorf("updating status: %w",
		apierrors.NewConflict(schema.GroupResource{Group: "reverser.gitops.dev", Resource: "gittargets"}, "live", errors.New("the object has been modified")))
	poll := ctrl.Result{RequeueAfter: time.Minute}
	failed := errors.New("fetching the remote failed")
	tests := []struct {
		name      string
		res       ctrl.Result
		err       error
		statusErr error
		want      ctrl.Result
		wantErr   error
	}{
		{"keeps the reconcile's result when all went well", poll, nil, nil, poll, nil},
		{"runs again shortly, without an error, after a status write met a newer object", poll, nil, conflict, ctrl.Result{RequeueAfter: ConflictRetry}, nil},
		{"returns the reconcile's error alone, without the result controller-runtime would ignore", poll, failed, nil, ctrl.Result{}, failed},
		{"returns the status write's error alone", poll, nil, failed, ctrl.Result{}, failed},
		{"keeps the reconcile's error when the status write also conflicted", poll, failed, conflict, ctrl.Result{}, failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Finish(context.Background(), tt.res, tt.err, tt.statusErr)
			assert.Equal(t, tt.want, res)
			if tt.wantErr == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tt.wantErr)
			}
		})
	}
}

func TestOwnChanges(t *testing.T) {
	target := func(generation int64, labels, annotations map[string]string, ready string) *v1alpha1.GitTarget {
		return &v1alpha1.GitTarget{
			ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: "team-a", Generation: generation, Labels: labels, Annotations: annotations},
			Status:     v1alpha1.GitTargetStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: ready}}},
		}
	}
	reason := func(t *v1alpha1.GitTarget, r string) *v1alpha1.GitTarget { t.Status.Conditions[0].Reason = r; return t }
	status := func(t *v1alpha1.GitTarget, s metav1.ConditionStatus) *v1alpha1.GitTarget {
		t.Status.Conditions[0].Status = s
		return t
	}
	stalled := func(t *v1alpha1.GitTarget) *v1alpha1.GitTarget {
		t.Status.Conditions = append(t.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "ProviderNotFound"})
		return t
	}
	old := target(1, nil, nil, "writing")
	tests := []struct {
		name string
		new  *v1alpha1.GitTarget
		want bool
	}{
		{"leaves out a status update that changes only a message, the operator's own write", target(1, nil, nil, "last write failed, retrying"), false},
		{"passes a status update that changes a condition's reason, which a reconcile may have read an older one of", reason(target(1, nil, nil, "writing"), "ObjectsRefused"), true},
		{"passes a status update that changes a condition's status", status(target(1, nil, nil, "writing"), metav1.ConditionFalse), true},
		{"passes a status update that adds a condition", stalled(target(1, nil, nil, "writing")), true},
		{"passes a spec change, which makes a new generation", target(2, nil, nil, "writing"), true},
		{"passes a label change", target(1, map[string]string{"team": "a"}, nil, "writing"), true},
		{"passes an annotation change, such as a request to reconcile now", target(1, nil, map[string]string{"reconcile.reverser.gitops.dev/requestedAt": "now"}, "writing"), true},
	}
	p := OwnChanges()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tt.new}))
		})
	}
	t.Run("passes creation and deletion", func(t *testing.T) {
		assert.True(t, p.Create(event.CreateEvent{Object: old}))
		assert.True(t, p.Delete(event.DeleteEvent{Object: old}))
	})
}
