package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

func TestValidateCommitRequest(t *testing.T) {
	alice := authnv1.UserInfo{Username: "alice", UID: "1", Groups: []string{"dev"}}
	cr := func(r *v1alpha1.Requester) *v1alpha1.CommitRequest {
		return &v1alpha1.CommitRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "release"},
			Spec: v1alpha1.CommitRequestSpec{TargetRef: v1alpha1.LocalObjectReference{Name: "live"}, Message: "m", Requester: r}}
	}
	tests := []struct {
		name      string
		cr        *v1alpha1.CommitRequest
		targetErr error
		want      string
	}{
		{name: "allows a request stamped with its creator for an existing target", cr: cr(RequesterOf(alice))},
		{name: "refuses a request the mutating webhook did not stamp", cr: cr(nil), want: "spec.requester must be the user creating it"},
		{name: "refuses a requester naming someone else", cr: cr(&v1alpha1.Requester{Username: "bob", UID: "1", Groups: []string{"dev"}}), want: "install the MutatingWebhookConfiguration"},
		{name: "refuses a requester with other groups", cr: cr(&v1alpha1.Requester{Username: "alice", UID: "1"}), want: "spec.requester"},
		{name: "refuses a request for a GitTarget that does not exist", cr: cr(RequesterOf(alice)), targetErr: errors.New("not found"), want: "spec.targetRef: GitTarget a/live: not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateCommitRequest(tt.cr, alice, tt.targetErr)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
			assert.ErrorContains(t, err, "CommitRequest a/release")
		})
	}
}

func TestStampRequester(t *testing.T) {
	t.Run("replaces a requester sent by the client with the authenticated user", func(t *testing.T) {
		in := v1alpha1.CommitRequest{TypeMeta: metav1.TypeMeta{APIVersion: "reverser.gitops.dev/v1alpha1", Kind: "CommitRequest"},
			Spec: v1alpha1.CommitRequestSpec{Message: "m", Requester: &v1alpha1.Requester{Username: "mallory"}}}
		raw, err := json.Marshal(in)
		require.NoError(t, err)
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Kind: "CommitRequest"},
			Object:   runtime.RawExtension{Raw: raw},
			UserInfo: authnv1.UserInfo{Username: "alice", UID: "42", Groups: []string{"system:authenticated"}},
		}}
		resp := StampRequester{}.Handle(context.Background(), req)
		require.True(t, resp.Allowed)
		require.Len(t, resp.Patches, 1)
		assert.Equal(t, "/spec/requester", resp.Patches[0].Path)
		assert.Equal(t, &v1alpha1.Requester{Username: "alice", UID: "42", Groups: []string{"system:authenticated"}}, resp.Patches[0].Value)
	})
	t.Run("touches nothing but the requester, not even a timeout Go would spell otherwise", func(t *testing.T) {
		raw := []byte(`{"apiVersion":"reverser.gitops.dev/v1alpha1","kind":"CommitRequest","metadata":{"name":"r"},` +
			`"spec":{"message":"m","timeout":"90s","targetRef":{"name":"live"}}}`)
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Kind: "CommitRequest"},
			Object: runtime.RawExtension{Raw: raw}, UserInfo: authnv1.UserInfo{Username: "alice"}}}
		resp := StampRequester{}.Handle(context.Background(), req)
		require.True(t, resp.Allowed)
		require.Len(t, resp.Patches, 1, "a decode and encode would also rewrite spec.timeout as 1m30s")
		assert.Equal(t, "/spec/requester", resp.Patches[0].Path)
	})
	t.Run("leaves every other request alone", func(t *testing.T) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Kind: metav1.GroupVersionKind{Kind: "CommitRequest"}}}
		resp := StampRequester{}.Handle(context.Background(), req)
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patches)
	})
}

// The manifests users install carry the own-resources entry's conditions as the demo and the
// e2e suite register them.
func TestTheInstalledOwnEntryCarriesTheOwnMatchConditions(t *testing.T) {
	raw, err := os.ReadFile("../config/webhook/manifests.yaml")
	require.NoError(t, err)
	var vwc admissionregv1.ValidatingWebhookConfiguration
	require.NoError(t, yaml.Unmarshal([]byte(strings.Split(string(raw), "\n---\n")[0]), &vwc))
	require.Equal(t, "ValidatingWebhookConfiguration", vwc.Kind)
	for _, w := range vwc.Webhooks {
		if w.Name == "reverser.gitops.dev" {
			assert.Equal(t, OwnMatchConditions(), w.MatchConditions)
			return
		}
	}
	t.Fatal("no reverser.gitops.dev entry in config/webhook/manifests.yaml")
}
