package sanitize

import (
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// clientSideApplyManager is the field manager kubectl apply (client-side) records. Its
// managedFields entry is an Update whose fields were computed after the request was
// defaulted, so it also claims every default the API server filled in.
const clientSideApplyManager = "kubectl-client-side-apply"

// clientSideApplied returns the last-applied configuration (see lastApplied) of an
// object with a client-side apply entry in its managedFields; nil for any other, whose
// annotation, if any, there is nothing to refine with and so no reason to read.
func clientSideApplied(object map[string]any) (map[string]any, error) {
	metadata, _ := object["metadata"].(map[string]any)
	entries, _ := metadata["managedFields"].([]any)
	for _, entry := range entries {
		if isClientSideApply(entry) {
			return lastApplied(object)
		}
	}
	return nil, nil
}

// lastApplied returns the object's kubectl last-applied configuration: exactly what the
// user applied. It is nil without the annotation. An annotation that is not a JSON
// object of the object's own apiVersion and kind yields an error wrapping
// ErrOwnershipUnknown: its paths could not be trusted to name this object's fields.
func lastApplied(object map[string]any) (map[string]any, error) {
	metadata, _ := object["metadata"].(map[string]any)
	annotations, _ := metadata["annotations"].(map[string]any)
	raw, present := annotations[LastAppliedAnnotation]
	if !present {
		return nil, nil
	}
	text, ok := raw.(string)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a string", ErrOwnershipUnknown, LastAppliedAnnotation)
	}
	var applied map[string]any
	if err := utiljson.Unmarshal([]byte(text), &applied); err != nil {
		return nil, fmt.Errorf("%w: parsing %s: %w", ErrOwnershipUnknown, LastAppliedAnnotation, err)
	}
	if applied == nil {
		return nil, fmt.Errorf("%w: %s is not an object", ErrOwnershipUnknown, LastAppliedAnnotation)
	}
	if !sameType(applied, object) {
		return nil, fmt.Errorf("%w: %s is of another apiVersion or kind than the object",
			ErrOwnershipUnknown, LastAppliedAnnotation)
	}
	return applied, nil
}

// sameType reports whether a and b have the same apiVersion and kind, both strings.
// Values are compared as strings: comparing two maps held in interfaces would panic.
func sameType(a, b map[string]any) bool {
	for _, field := range []string{"apiVersion", "kind"} {
		av, aOK := a[field].(string)
		bv, bOK := b[field].(string)
		if !aOK || !bOK || av != bv {
			return false
		}
	}
	return true
}

// isClientSideApply reports whether a managedFields entry is kubectl apply's
// (client-side) Update, the one entry whose fields the last-applied configuration refines.
func isClientSideApply(entry any) bool {
	m, _ := entry.(map[string]any)
	return m["manager"] == clientSideApplyManager && m["operation"] == "Update"
}

// appliedOwnership narrows recorded, the fields of the client-side apply entry, to those
// also present in applied (the last-applied configuration): the defaults the entry claims
// were never applied, so nobody asked for them. For a core Secret, an applied
// stringData.X counts as an applied data.X, as in ownedFields.
func appliedOwnership(recorded *fieldpath.Set, applied map[string]any, secret bool) *fieldpath.Set {
	present := &fieldpath.Set{}
	addPresent(applied, nil, recorded, present)
	if secret {
		present = withDataForStringData(present)
	}
	return recorded.Intersection(present)
}

// addPresent inserts into present the path of every field below v, which is at path.
// Maps name their entries by key. List items are named the way recorded (the recorded
// fields at path) names them, since the last-applied configuration carries no schema to
// say which lists are associative and by which keys.
func addPresent(v any, path fieldpath.Path, recorded, present *fieldpath.Set) {
	switch typed := v.(type) {
	case map[string]any:
		for k, x := range typed {
			addChild(x, path, fieldpath.PathElement{FieldName: &k}, recorded, present)
		}
	case []any:
		if recorded == nil {
			return
		}
		list := readRecordedList(recorded)
		for i, item := range typed {
			for _, pe := range list.itemElements(item, i) {
				addChild(item, path, pe, recorded, present)
			}
		}
	}
}

// addChild inserts the field pe below path and everything below it.
func addChild(v any, path fieldpath.Path, pe fieldpath.PathElement, recorded, present *fieldpath.Set) {
	p := append(path.Copy(), pe)
	present.Insert(p)
	var child *fieldpath.Set
	if recorded != nil {
		child, _ = recorded.Children.Get(pe)
	}
	addPresent(v, p, child, present)
}

// recordedList is what the recorded fields of one list say about naming its items: the
// kinds of path elements they use and, for an associative list, every recorded key with
// its fields as a map (keys[i] is elements[i]'s), read once for all the applied items.
type recordedList struct {
	kinds    listKinds
	elements []fieldpath.PathElement
	keys     []any
}

// readRecordedList reads how recorded, the recorded fields of a list, names its items.
func readRecordedList(recorded *fieldpath.Set) recordedList {
	list := recordedList{kinds: elementKinds(recorded)}
	if list.kinds.keyNames == nil {
		return list
	}
	named := fieldpath.PathElementSet{}
	recorded.Members.Iterate(named.Insert)
	recorded.Children.Iterate(named.Insert)
	named.Iterate(func(pe fieldpath.PathElement) {
		if pe.Key == nil {
			return
		}
		key := make(map[string]any, len(*pe.Key))
		for _, f := range *pe.Key {
			key[f.Name] = f.Value.Unstructured()
		}
		list.elements = append(list.elements, pe)
		list.keys = append(list.keys, key)
	})
	return list
}

// itemElements names item, the i-th item of an applied list, as the recorded fields name
// it. An item of an associative list takes the key of the recorded item it is: the exact
// key, or else every recorded key whose fields agree wherever the applied item has them
// (a user leaves out a key field the server defaults, such as a port's protocol). Naming
// more than one item when that is ambiguous keeps too much rather than drop what a user
// applied.
func (l recordedList) itemElements(item any, i int) []fieldpath.PathElement {
	m, isMap := item.(map[string]any)
	if !isMap || l.kinds.keyNames == nil {
		return itemElements(l.kinds, item, i)
	}
	var named []fieldpath.PathElement
	for _, at := range keyedMatches(l.keys, m, l.kinds.keyNames) {
		named = append(named, l.elements[at])
	}
	return named
}
