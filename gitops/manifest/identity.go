package manifest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Identity is what makes a Kubernetes object the same object across
// versions of its API: group, kind, namespace and name. The version is left
// out on purpose, so a file written as apps/v1beta1 is still found when the
// cluster serves apps/v1.
type Identity struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// String renders the identity for people and logs: "apps/Deployment
// team-a/api", "ConfigMap team-a/app" for the core group, "ClusterRole
// admin" for cluster-scoped objects.
func (id Identity) String() string {
	kind := id.Kind
	if id.Group != "" {
		kind = id.Group + "/" + id.Kind
	}
	if id.Namespace == "" {
		return kind + " " + id.Name
	}
	return kind + " " + id.Namespace + "/" + id.Name
}

// IdentityOf returns the identity of a cluster object, with the group taken
// from its apiVersion. A nil object has the zero identity.
func IdentityOf(obj *unstructured.Unstructured) Identity {
	if obj == nil {
		return Identity{}
	}
	gvk := obj.GroupVersionKind()
	return Identity{
		Group:     gvk.Group,
		Kind:      gvk.Kind,
		Namespace: obj.GetNamespace(),
		Name:      obj.GetName(),
	}
}
