package batch

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
)

// writable returns obj as it is written into content (the file that holds or will hold
// it): without server-owned state, and, unless Options.KeepDefaultedFields, without the
// fields no field manager owns — except those the object's document in content already
// has, so a field a person wrote never leaves Git because the server would default it.
// DropUnowned runs before Object because it reads the last-applied annotation (what a
// client-side kubectl apply applied), which Object strips.
func (w *worker) writable(obj *unstructured.Unstructured, content []byte) *unstructured.Unstructured {
	if w.opts.KeepDefaultedFields {
		return sanitize.Object(obj)
	}
	id := manifest.IdentityOf(obj)
	owned, err := sanitize.DropUnowned(obj, nil)
	if err != nil {
		w.log.V(1).Info("field ownership unknown: writing every field the managed fields cannot rule out",
			"object", id.String(), "reason", err.Error())
	}
	trimmed := sanitize.Object(owned)
	if err != nil || len(content) == 0 || reflect.DeepEqual(trimmed.Object, sanitize.Object(obj).Object) {
		// Nothing to leave out, or no document to keep fields from: Git's copy need not be
		// parsed (a restart re-plans every object; this spares one parse of each file).
		return trimmed
	}
	// A file that does not parse is refused by the edit that follows, with the reason.
	existing, _ := manifest.Document(content, id)
	if existing == nil {
		return trimmed
	}
	owned, _ = sanitize.DropUnowned(obj, existing)
	return sanitize.Object(owned)
}
