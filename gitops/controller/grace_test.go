package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestCredentialsGraceLeft(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	condition := func(typ string) func(reason string, ago time.Duration) []metav1.Condition {
		return func(reason string, ago time.Duration) []metav1.Condition {
			return []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: reason,
				LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
		}
	}
	stalled, reconciling := condition(v1alpha1.ConditionStalled), condition(v1alpha1.ConditionReconciling)
	tests := []struct {
		name  string
		conds []metav1.Condition
		want  time.Duration
	}{
		{"gives the whole grace to credentials found unusable just now", nil, credentialsGrace},
		{"gives the whole grace when the target was Stalled for something else", stalled(v1alpha1.ReasonBranchNotAllowed, time.Hour), credentialsGrace},
		{"gives the whole grace when the target was Reconciling for something else", reconciling(v1alpha1.ReasonUnreachable, time.Hour), credentialsGrace},
		{"gives what is left of the grace while the credentials stay unusable", reconciling(v1alpha1.ReasonProviderNotReady, 4*time.Second), credentialsGrace - 4*time.Second},
		{"gives nothing once the credentials stayed unusable for the grace", reconciling(v1alpha1.ReasonProviderNotReady, time.Minute), 0},
		{"gives nothing once the target is Stalled for its credentials", stalled(v1alpha1.ReasonProviderNotReady, time.Second), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, credentialsGraceLeft(tt.conds, now))
		})
	}
}
