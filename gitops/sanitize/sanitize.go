// Package sanitize strips server-owned state from cluster objects before they
// are written to Git.
//
// It works by denylist, never by whitelist: a field survives unless it is
// known to be set by the API server or a controller. Whitelisting top-level
// fields silently loses data for kinds that keep their payload outside
// spec/data (StorageClass provisioner, CRD top-level fields, ...).
package sanitize

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// LastAppliedAnnotation is the annotation kubectl apply stores on objects; it
// duplicates the whole object and changes on every apply, so it never belongs
// in Git.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// serverOwnedMetadata lists the metadata fields the API server sets and owns, and the
// owner references, which bind an object to this cluster's objects by uid: writing them to
// Git would make every stored revision a diff, or an object another cluster deletes.
func serverOwnedMetadata() []string {
	return []string{
		"uid",
		"resourceVersion",
		"generation",
		"creationTimestamp",
		"managedFields",
		"selfLink",
		"deletionTimestamp",
		"deletionGracePeriodSeconds",
		// Each names its owner by the owner's uid, which no other cluster (nor the owner
		// re-created) has: applied there, the garbage collector finds no such owner and
		// deletes the object, and Flux or Argo CD create it again.
		"ownerReferences",
	}
}

// Object returns a deep copy of obj without server-owned state: status, the
// server-owned metadata fields and the owner references, the kubectl last-applied annotation (the
// annotations map is dropped when that leaves it empty) and controller-set
// fields of known kinds (core/v1 Service spec.clusterIP and spec.clusterIPs,
// unless people chose them: see chosenClusterIPs).
// Every other field survives. obj itself is never modified; a nil obj yields
// nil.
func Object(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if obj == nil {
		return nil
	}
	return object(obj, chosenClusterIPs(obj.Object))
}

// OwnedObject is Object for owned, the result of DropUnowned(from, …): which values people
// chose (see chosenClusterIPs) is read from from's managedFields, which DropUnowned leaves
// out.
func OwnedObject(owned, from *unstructured.Unstructured) *unstructured.Unstructured {
	if owned == nil {
		return nil
	}
	var kept map[string]bool
	if from != nil {
		kept = chosenClusterIPs(from.Object)
	}
	return object(owned, kept)
}

// OwnedForm is what the writer commits of obj where Git has no document of it yet:
// OwnedObject of DropUnowned(obj, nil). Admission compares it before and after an update
// to tell a write that changes nothing in Git. err is DropUnowned's (the fields it could
// not rule out are kept).
func OwnedForm(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	owned, err := DropUnowned(obj, nil)
	return OwnedObject(owned, obj), err
}

func object(obj *unstructured.Unstructured, keptClusterIPs map[string]bool) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: copyMap(obj.Object)}
	if out.Object == nil {
		out.Object = map[string]any{}
	}
	delete(out.Object, "status")
	dropMetadata(out.Object)
	dropControllerFields(out.Object, keptClusterIPs)
	return out
}

// dropMetadata removes server-owned metadata fields and the last-applied
// annotation from the object's metadata map, in place.
func dropMetadata(object map[string]any) {
	metadata, ok := object["metadata"].(map[string]any)
	if !ok {
		return
	}
	for _, field := range serverOwnedMetadata() {
		delete(metadata, field)
	}
	dropAnnotation(object, LastAppliedAnnotation)
}

// dropControllerFields removes fields the server or the cluster's controllers set for
// known kinds, in place, whatever the ownership says (also with --keep-defaulted-fields,
// and for an object whose managedFields cannot be read): a core/v1 Service's cluster IPs,
// allocated by the API server and different in every cluster (except those in kept, which
// people chose); the status (`phase: Pending`) the API server gives each of an apps/v1
// StatefulSet's volumeClaimTemplates; an apps/v1 Deployment's
// deployment.kubernetes.io/revision annotation (a commit per rollout); and a batch/v1
// Job's generated selector and the controller-uid labels of the Job and its template, unless it sets
// manualSelector (applied elsewhere, the API server refuses a selector it did not make); what
// the tokens controller fills into a core/v1 Secret of type kubernetes.io/service-account-token
// (dropTokenFields); a core/v1 Node's node.alpha.kubernetes.io/ttl annotation, which the TTL
// controller moves as the cluster grows and shrinks.
func dropControllerFields(object map[string]any, kept map[string]bool) {
	if isKind(object, "apps/v1", "Deployment") {
		dropAnnotation(object, "deployment.kubernetes.io/revision")
	}
	if isKind(object, "v1", "Node") {
		dropAnnotation(object, "node.alpha.kubernetes.io/ttl")
	}
	if isKind(object, "v1", "Secret") && object["type"] == "kubernetes.io/service-account-token" {
		dropTokenFields(object)
	}
	spec, ok := object["spec"].(map[string]any)
	if !ok {
		return
	}
	switch {
	case isKind(object, "batch/v1", "Job"):
		if manual, _ := spec["manualSelector"].(bool); !manual {
			delete(spec, "selector")
			template, _ := spec["template"].(map[string]any)
			for _, o := range []map[string]any{template, object} { // the server copies them to the Job too
				dropLabels(o, "controller-uid", "batch.kubernetes.io/controller-uid")
			}
		}
	case isKind(object, "v1", "Service"):
		for _, field := range []string{"clusterIP", "clusterIPs"} {
			if !kept[field] {
				delete(spec, field)
			}
		}
	case isKind(object, "apps/v1", "StatefulSet"):
		templates, _ := spec["volumeClaimTemplates"].([]any)
		for _, template := range templates {
			if m, ok := template.(map[string]any); ok {
				delete(m, "status")
			}
		}
	}
}

// dropTokenFields removes, in place, what the tokens controller fills into a Secret of type
// kubernetes.io/service-account-token (captured with --capture-service-account-tokens): the
// token, the cluster's CA certificate, the namespace and the account's uid; and the labels
// the cluster keeps on a legacy token: the day the API server last saw it used, which moves
// daily (a commit a day), and when the cleaner marked it invalid, which would make another
// cluster reject it. What people write is the type and the account's name; the controller
// of the cluster it is applied to fills the rest for its own account, and deletes a Secret
// that names an account uid it does not have.
func dropTokenFields(object map[string]any) {
	dropAnnotation(object, "kubernetes.io/service-account.uid")
	dropLabels(object, "kubernetes.io/legacy-token-last-used", "kubernetes.io/legacy-token-invalid-since")
	data, ok := object["data"].(map[string]any)
	if !ok {
		return
	}
	for _, key := range []string{"token", "ca.crt", "namespace"} {
		delete(data, key)
	}
	if len(data) == 0 {
		delete(object, "data")
	}
}

// dropAnnotation removes one annotation from object's metadata, and the annotations map
// when that leaves it empty.
func dropAnnotation(object map[string]any, name string) {
	metadata, _ := object["metadata"].(map[string]any)
	annotations, ok := metadata["annotations"].(map[string]any)
	if !ok {
		return
	}
	delete(annotations, name)
	if len(annotations) == 0 {
		delete(metadata, "annotations")
	}
}

// dropLabels removes labels from object's metadata (a Pod template's), and the labels map
// when that leaves it empty.
func dropLabels(object map[string]any, names ...string) {
	metadata, _ := object["metadata"].(map[string]any)
	labels, ok := metadata["labels"].(map[string]any)
	if !ok {
		return
	}
	for _, name := range names {
		delete(labels, name)
	}
	if len(labels) == 0 {
		delete(metadata, "labels")
	}
}

// chosenClusterIPs says which of a core/v1 Service's spec.clusterIP and
// spec.clusterIPs people chose rather than the API server allocated: "None"
// (a headless Service, which a StatefulSet's pod DNS needs; the server never
// allocates it), or a value some field manager owns (an address pinned in the
// manifest).
func chosenClusterIPs(object map[string]any) map[string]bool {
	if !isKind(object, "v1", "Service") {
		return nil
	}
	spec, _ := object["spec"].(map[string]any)
	kept := map[string]bool{}
	if ip, _ := spec["clusterIP"].(string); ip == "None" {
		kept["clusterIP"] = true
	}
	if ips, _ := spec["clusterIPs"].([]any); len(ips) > 0 && ips[0] == "None" {
		kept["clusterIPs"] = true
	}
	metadata, _ := object["metadata"].(map[string]any)
	entries, _ := metadata["managedFields"].([]any)
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		fields, _ := entry["fieldsV1"].(map[string]any)
		specFields, _ := fields["f:spec"].(map[string]any)
		for _, field := range []string{"clusterIP", "clusterIPs"} {
			if _, owned := specFields["f:"+field]; owned {
				kept[field] = true
			}
		}
	}
	return kept
}

// isKind reports whether the object has exactly this apiVersion and kind; CRDs
// that happen to be called Service keep all their fields.
func isKind(object map[string]any, apiVersion, kind string) bool {
	v, _ := object["apiVersion"].(string)
	k, _ := object["kind"].(string)
	return v == apiVersion && k == kind
}

// copyMap deep-copies a JSON-like map. Unlike runtime.DeepCopyJSON it never
// panics on unexpected value types: maps and slices are copied recursively,
// every other value is copied by assignment.
func copyMap(in map[string]any) map[string]any {
	if in == nil {
		return nil
	}
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = copyValue(v)
	}
	return out
}

// copyValue deep-copies one JSON-like value; see copyMap.
func copyValue(v any) any {
	switch typed := v.(type) {
	case map[string]any:
		return copyMap(typed)
	case []any:
		if typed == nil {
			return typed
		}
		out := make([]any, len(typed))
		for i, item := range typed {
			out[i] = copyValue(item)
		}
		return out
	default:
		return v
	}
}
