package status

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
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
