package webhook

import (
	"encoding/json"
	"fmt"
	"path"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
)

// partialMeta decodes only the metadata a decision needs, not the whole object.
type partialMeta struct {
	Metadata struct {
		Name            string                  `json:"name"`
		Labels          map[string]string       `json:"labels"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
	// Type is a Secret's type (see secretType): raw, since a custom resource may have a
	// top-level "type" of any shape, which must not make its request undecodable.
	Type json.RawMessage `json:"type"`
}

// secretType is the object's top-level "type" when it is a string, as a Secret's is; ""
// otherwise.
func (m *partialMeta) secretType() string {
	var t string
	if json.Unmarshal(m.Type, &t) != nil {
		return ""
	}
	return t
}

func (m *partialMeta) unmarshal(raw []byte) error {
	if err := json.Unmarshal(raw, m); err != nil {
		return fmt.Errorf("decoding the object's metadata: %w", err)
	}
	return nil
}

// decodeFull decodes a whole raw object the way the watcher's dynamic informers do, so
// attribution digests agree; nil when absent or undecodable.
func decodeFull(raw []byte) *unstructured.Unstructured {
	if len(raw) == 0 {
		return nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil
	}
	return u
}

// CanonicalLocation is where a new object lands in folder (a .sops.yaml file when it is
// sensitive), or why it cannot.
func CanonicalLocation(folder string, gvr schema.GroupVersionResource, namespace, name string, sensitive bool) (string, string) {
	p, err := plan.CanonicalPath(folder, gvr, namespace, name, sensitive)
	if err != nil {
		return "", err.Error()
	}
	if !plan.Within(folder, p) {
		return "", fmt.Sprintf("%s is outside spec.path %s", p, path.Clean(folder))
	}
	return p, ""
}
