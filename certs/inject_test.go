package certs

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func TestCABundlePatch(t *testing.T) {
	bundle := []byte("new bundle")
	url := "https://127.0.0.1:9443/validate"
	hook := func(name string, ca []byte) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}}
	}
	tests := []struct {
		name   string
		hooks  []admissionregistrationv1.ValidatingWebhook
		needed bool
		want   []jsonPatchOp
	}{
		{
			name:   "every webhook without the bundle gets it, guarded by its name",
			hooks:  []admissionregistrationv1.ValidatingWebhook{hook("a.x", nil), hook("b.x", []byte("old"))},
			needed: true,
			want: []jsonPatchOp{
				{Op: "test", Path: "/webhooks/0/name", Value: "a.x"},
				{Op: "add", Path: "/webhooks/0/clientConfig/caBundle", Value: "bmV3IGJ1bmRsZQ=="},
				{Op: "test", Path: "/webhooks/1/name", Value: "b.x"},
				{Op: "add", Path: "/webhooks/1/clientConfig/caBundle", Value: "bmV3IGJ1bmRsZQ=="},
			},
		},
		{
			name:   "a webhook already carrying the bundle is left out",
			hooks:  []admissionregistrationv1.ValidatingWebhook{hook("a.x", bundle), hook("b.x", nil)},
			needed: true,
			want: []jsonPatchOp{
				{Op: "test", Path: "/webhooks/1/name", Value: "b.x"},
				{Op: "add", Path: "/webhooks/1/clientConfig/caBundle", Value: "bmV3IGJ1bmRsZQ=="},
			},
		},
		{name: "a configuration that already carries the bundle needs no patch", hooks: []admissionregistrationv1.ValidatingWebhook{hook("a.x", bundle)}},
		{name: "a configuration without webhooks needs no patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, needed, err := caBundlePatch(validatingCAs(&admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: tt.hooks}), bundle)
			require.NoError(t, err)
			assert.Equal(t, tt.needed, needed)
			if !tt.needed {
				assert.Nil(t, patch)
				return
			}
			var got []jsonPatchOp
			require.NoError(t, json.Unmarshal(patch, &got))
			assert.Equal(t, tt.want, got)
		})
	}
}
