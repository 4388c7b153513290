package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// leaderOf is a Locator that knows only the targets it writes, as the writer does.
type leaderOf map[types.NamespacedName]string

func (l leaderOf) Locate(target types.NamespacedName, _ schema.GroupVersionResource, _, _, _ string) (string, string) {
	if p, ok := l[target]; ok {
		return p, "already held"
	}
	return "", ""
}

func TestLocateUsesTheCanonicalPathForATargetTheWriterDoesNotKnow(t *testing.T) {
	known := types.NamespacedName{Namespace: "a", Name: "written-here"}
	elsewhere := types.NamespacedName{Namespace: "a", Name: "written-by-the-leader"}
	w := &Watched{View: &View{Locator: leaderOf{known: "live/custom.yaml"}}, Sensitive: func(schema.GroupResource) bool { return false }}
	targets := []TargetState{{Key: known, Folder: "live"}, {Key: elsewhere, Folder: "live"}}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}
	w.locate(targets, Request{Kind: "ConfigMap", Namespace: "a", Name: "app"}, req)
	assert.Equal(t, "live/custom.yaml", targets[0].Path)
	assert.Equal(t, "already held", targets[0].PathProblem)
	assert.Equal(t, "live/a/configmaps/app.yaml", targets[1].Path, "the same verdict and warning on every replica")
	assert.Empty(t, targets[1].PathProblem)
}
