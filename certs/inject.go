package certs

import (
	"bytes"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// webhookCA is what injection needs of one webhook entry, validating or mutating.
type webhookCA struct {
	name     string
	caBundle []byte
}

// validatingCAs lists the entries of a ValidatingWebhookConfiguration.
func validatingCAs(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) []webhookCA {
	out := make([]webhookCA, 0, len(vwc.Webhooks))
	for _, w := range vwc.Webhooks {
		out = append(out, webhookCA{w.Name, w.ClientConfig.CABundle})
	}
	return out
}

// mutatingCAs lists the entries of a MutatingWebhookConfiguration.
func mutatingCAs(mwc *admissionregistrationv1.MutatingWebhookConfiguration) []webhookCA {
	out := make([]webhookCA, 0, len(mwc.Webhooks))
	for _, w := range mwc.Webhooks {
		out = append(out, webhookCA{w.Name, w.ClientConfig.CABundle})
	}
	return out
}

// caBundlePatch returns a JSON patch that sets caBundle on every webhook entry whose caBundle
// differs from bundle, and nothing else. Each change is guarded by a test of that webhook's
// name, so a list reordered meanwhile fails the patch instead of changing the wrong entry.
// needed is false when every webhook already carries the bundle.
func caBundlePatch(hooks []webhookCA, bundle []byte) (patch []byte, needed bool, err error) {
	var ops []jsonPatchOp
	for i, w := range hooks {
		if bytes.Equal(w.caBundle, bundle) {
			continue
		}
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: w.name},
			// "add" sets the member whether or not it exists yet.
			jsonPatchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: bundle},
		)
	}
	if len(ops) == 0 {
		return nil, false, nil
	}
	patch, err = json.Marshal(ops)
	if err != nil {
		return nil, false, fmt.Errorf("encoding the caBundle patch: %w", err)
	}
	return patch, true, nil
}
