package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		given *metav1.Duration
		want  time.Duration
	}{
		{"takes spec.timeout", &metav1.Duration{Duration: 5 * time.Minute}, 5 * time.Minute},
		{"waits for nothing with 0s: only a window already open takes the message", &metav1.Duration{}, 0},
		{"waits the default for a request stored before the CRD defaulted it", nil, DefaultCommitRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, timeout(&v1alpha1.CommitRequest{Spec: v1alpha1.CommitRequestSpec{Timeout: tc.given}}))
		})
	}
}
