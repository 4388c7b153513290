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

// unchangedAtTip reports whether the document of id at the remote tip already holds what
// writable would write, judged by the index's digest, so that confirming an unchanged
// object (a restart re-plans every object) costs neither reading nor parsing its file. It
// answers true only when the digest matches obj with every field (what writable keeps when
// the document has them all) or with only the owned ones (when it has none of the others);
// anything else, and any file this plan already edits, takes the full edit, which also
// finds documents that mean the same but are written differently.
func (w *worker) unchangedAtTip(t *target, p *writePlan, id manifest.Identity, obj *unstructured.Unstructured) bool {
	if _, planned := p.located[id]; planned {
		return false
	}
	loc, ok := t.index.Load().lookup(id)
	if !ok || loc.Digest == (manifest.Digest{}) {
		return false
	}
	if _, edited := p.files[loc.File]; edited {
		return false
	}
	if d, err := manifest.ValueDigest(sanitize.Object(obj)); err == nil && d == loc.Digest {
		return true
	}
	if w.opts.KeepDefaultedFields {
		return false
	}
	owned, err := sanitize.DropUnowned(obj, nil)
	if err != nil {
		return false
	}
	d, err := manifest.ValueDigest(sanitize.Object(owned))
	return err == nil && d == loc.Digest
}
