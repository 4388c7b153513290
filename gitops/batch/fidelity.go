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
func (w *worker) writable(obj *unstructured.Unstructured, content []byte) *unstructured.Unstructured {
	return w.forms(obj, len(content) > 0).writable(obj, content)
}

// writable is worker.writable from forms already computed, compared when content is not
// empty (a new document has nothing to keep from Git).
func (f writtenForms) writable(obj *unstructured.Unstructured, content []byte) *unstructured.Unstructured {
	if len(content) == 0 || f.fixed {
		// Git's copy need not be parsed (a restart re-plans every object; this spares one
		// parse of each file).
		return f.trimmed
	}
	// A file that does not parse is refused by the edit that follows, with the reason.
	existing, _ := manifest.Document(content, manifest.IdentityOf(obj))
	return f.over(obj, existing)
}

// writtenForms is what writable needs before it looks at Git's copy of the object.
type writtenForms struct {
	// full is the object with every field (nil unless compared), trimmed without the
	// unowned ones (full itself under KeepDefaultedFields).
	full, trimmed *unstructured.Unstructured
	// fixed says trimmed is written whatever Git has: every field is kept, nothing is
	// unowned, or ownership is unknown.
	fixed bool
}

// forms computes obj's writtenForms; without compare only trimmed (what is written when
// Git has no document), sparing the comparison a new object does not need. DropUnowned
// runs before Object because it reads the last-applied annotation (what a client-side
// kubectl apply applied), which Object strips.
func (w *worker) forms(obj *unstructured.Unstructured, compare bool) writtenForms {
	if w.opts.KeepDefaultedFields {
		full := sanitize.Object(obj)
		return writtenForms{full: full, trimmed: full, fixed: true}
	}
	trimmed, err := sanitize.OwnedForm(obj)
	if err != nil {
		w.log.V(1).Info("field ownership unknown: writing every field the managed fields cannot rule out",
			"object", manifest.IdentityOf(obj).String(), "reason", err.Error())
	}
	if !compare {
		return writtenForms{trimmed: trimmed}
	}
	full := sanitize.Object(obj)
	return writtenForms{full: full, trimmed: trimmed, fixed: err != nil || reflect.DeepEqual(trimmed.Object, full.Object)}
}

// over is the written form when the object's document in Git is existing (nil: none),
// keeping the unowned fields it has.
func (f writtenForms) over(obj *unstructured.Unstructured, existing map[string]any) *unstructured.Unstructured {
	if f.fixed || existing == nil {
		return f.trimmed
	}
	owned, _ := sanitize.DropUnowned(obj, existing)
	return sanitize.OwnedObject(owned, obj)
}

// unchangedAtTip reports whether the document of id at the remote tip already holds what
// writable would write, judged by the index's digest, so that confirming an unchanged
// object (a restart re-plans every object) costs neither reading nor parsing its file.
// When the written form depends on the document, the document is guessed to be obj with
// every field or with only the owned ones; a guess whose digest matches is the document's
// value, so the written form is computed over it exactly as over the parsed file, and must
// give that digest back. It answers false when the index does not describe the tip the plan
// reads, for a file this plan already edits, and whenever no guess matches: the full edit
// then decides, and still finds documents that mean the same but are written differently.
// f is obj's compared writtenForms, which the edit that follows a miss uses too.
func (w *worker) unchangedAtTip(t *target, p *writePlan, id manifest.Identity, obj *unstructured.Unstructured, f writtenForms) bool {
	if _, planned := p.located[id]; planned {
		return false
	}
	ix := t.index.Load()
	loc, ok := ix.lookup(id)
	if !ok || loc.Digest == (manifest.Digest{}) || ix.describes() != w.remoteTip {
		return false
	}
	if _, edited := p.files[loc.File]; edited {
		return false
	}
	if f.fixed {
		return hasDigest(f.trimmed, loc.Digest)
	}
	for _, doc := range []*unstructured.Unstructured{f.full, f.trimmed} {
		if hasDigest(doc, loc.Digest) {
			return hasDigest(f.over(obj, doc.Object), loc.Digest)
		}
	}
	return false
}

// hasDigest reports whether obj, written, has digest d.
func hasDigest(obj *unstructured.Unstructured, d manifest.Digest) bool {
	got, err := manifest.ValueDigest(obj)
	return err == nil && got == d
}
