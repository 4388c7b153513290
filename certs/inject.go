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

// caBundlePatch returns a JSON patch that sets caBundle on every webhook of vwc whose caBundle
// differs from bundle, and nothing else. Each change is guarded by a test of that webhook's
// name, so a list reordered meanwhile fails the patch instead of changing the wrong entry.
// needed is false when every webhook already carries the bundle.
func caBundlePatch(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, bundle []byte) (patch []byte, needed bool, err error) {
	var ops []jsonPatchOp
	for i, w := range vwc.Webhooks {
		if bytes.Equal(w.ClientConfig.CABundle, bundle) {
			continue
		}
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: w.Name},
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
