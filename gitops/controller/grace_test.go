package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
		{"gives no grace to a target Stalled for something that suspended its writer: nothing goes on", stalled(v1alpha1.ReasonBranchNotAllowed, time.Hour), 0},
		{"gives no grace to a target Stalled for its template either", stalled(v1alpha1.ReasonInvalidTemplate, time.Second), 0},
		{"gives the whole grace to a target whose folder is Stalled for its content, whose writer runs", stalled(v1alpha1.ReasonUnsupportedContent, time.Hour), credentialsGrace},
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

func TestSetCredentialsGrace(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	condition := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: since}
	}
	stalledContent := condition(v1alpha1.ConditionStalled, v1alpha1.ReasonUnsupportedContent)
	tests := []struct {
		name        string
		conds       []metav1.Condition
		wantStalled string // the Stalled reason left, "" for none
		wantSince   bool   // Reconciling keeps the time the grace began
	}{
		{"reports a Ready target's unusable credentials as Reconciling",
			[]metav1.Condition{condition(v1alpha1.ConditionReady, v1alpha1.ReasonSucceeded)}, "", false},
		{"keeps a folder Stalled for its content Stalled beside the grace, so admission goes on denying",
			[]metav1.Condition{stalledContent}, v1alpha1.ReasonUnsupportedContent, false},
		{"keeps counting a grace that began earlier beside a folder Stalled for its content",
			[]metav1.Condition{stalledContent, condition(v1alpha1.ConditionReconciling, v1alpha1.ReasonProviderNotReady)}, v1alpha1.ReasonUnsupportedContent, true},
		{"starts the grace anew when the target was Reconciling for something else",
			[]metav1.Condition{condition(v1alpha1.ConditionReconciling, v1alpha1.ReasonUnreachable)}, "", false},
		{"keeps counting a grace that began earlier",
			[]metav1.Condition{condition(v1alpha1.ConditionReconciling, v1alpha1.ReasonProviderNotReady)}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := &v1alpha1.GitTarget{Status: v1alpha1.GitTargetStatus{Conditions: tt.conds}}
			tgt.Generation = 2
			setCredentialsGrace(tgt, "GitProvider team-a/repo: Secret team-a/creds not found")
			conds := tgt.Status.Conditions
			r := apimeta.FindStatusCondition(conds, v1alpha1.ConditionReconciling)
			if assert.NotNil(t, r) {
				assert.Equal(t, metav1.ConditionTrue, r.Status)
				assert.Equal(t, v1alpha1.ReasonProviderNotReady, r.Reason)
				assert.Equal(t, tt.wantSince, r.LastTransitionTime.Equal(&since), "when the grace began")
			}
			s := apimeta.FindStatusCondition(conds, v1alpha1.ConditionStalled)
			if tt.wantStalled == "" {
				assert.Nil(t, s)
				return
			}
			if assert.NotNil(t, s) {
				assert.Equal(t, tt.wantStalled, s.Reason)
				assert.Equal(t, time.Duration(0), credentialsGraceLeft(conds, r.LastTransitionTime.Add(credentialsGrace)),
					"the grace still ends, though the folder is Stalled for its content")
			}
		})
	}
}
