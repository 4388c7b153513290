package sanitize

import (
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SameWritten reports whether an update from old to obj leaves what the writer would commit
// as it was: a field only the cluster's controllers own (the volume kube-controller-manager
// binds a claim to, the revision annotation the Deployment controller adds, DropUnowned),
// server metadata (the deletionTimestamp a graceful delete sets), status on a resource
// without a status subresource, and, on an object whose deletion has begun, its finalizers
// (a controller finishing the deletion; the object leaves Git when it is gone). whole
// compares every field but status and server metadata, as the writer writes an object it
// encrypts and any object under --keep-defaulted-fields. A change of labels is never the
// same: labels route the object into and out of targets. Compared without the document in
// Git, whose fields no one owns are written with their new values: callers use the answer
// to allow or to attribute a write, never to drop it.
func SameWritten(old, obj *unstructured.Unstructured, whole bool) bool {
	if obj == nil || old == nil || !maps.Equal(obj.GetLabels(), old.GetLabels()) {
		return false
	}
	after, before := writtenForm(obj, whole), writtenForm(old, whole)
	if old.GetDeletionTimestamp() != nil {
		unstructured.RemoveNestedField(after.Object, "metadata", "finalizers")
		unstructured.RemoveNestedField(before.Object, "metadata", "finalizers")
	}
	return reflect.DeepEqual(after.Object, before.Object)
}

// writtenForm is what the writer commits of u where Git has no document of it: every field
// but status and server metadata when whole, else only the owned ones (OwnedForm; unknown
// ownership keeps every field).
func writtenForm(u *unstructured.Unstructured, whole bool) *unstructured.Unstructured {
	if whole {
		return Object(u)
	}
	f, _ := OwnedForm(u)
	return f
}
