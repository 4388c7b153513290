package controller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

func TestRefusedSummary(t *testing.T) {
	tests := []struct {
		name    string
		refused []string
		want    string
	}{
		{"spells out a single refusal", []string{"Secret app/db: not written: a"},
			"1 object(s) not written: Secret app/db: not written: a"},
		{"spells out three refusals", []string{"A: a", "B: b", "C: c"},
			"3 object(s) not written: A: a; B: b; C: c"},
		{"counts the refusals beyond the third", []string{"A: a", "B: b", "C: c", "D: d", "E: e"},
			"5 object(s) not written: A: a; B: b; C: c; and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, controller.RefusedSummary(tt.refused))
		})
	}
}
