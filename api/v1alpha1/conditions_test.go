package v1alpha1

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAConditionMessageTheAPIServerWouldRefuseIsCut(t *testing.T) {
	var conds []metav1.Condition
	long := strings.Repeat("é", MaxMessage) // two bytes each
	SetStalled(&conds, 1, ReasonResourceNotFound, long)
	msg := conds[0].Message
	assert.LessOrEqual(t, len(msg), MaxMessage)
	assert.True(t, utf8.ValidString(msg), "cut on a character boundary")
	assert.True(t, strings.HasSuffix(msg, "…"))

	SetStalled(&conds, 1, ReasonResourceNotFound, "short")
	assert.Equal(t, "short", conds[0].Message)
}
