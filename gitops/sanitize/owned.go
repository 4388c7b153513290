package sanitize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// ErrOwnershipUnknown is returned by DropUnowned when the object's managedFields cannot be
// read against the object (an entry of another apiVersion, of an unknown fieldsType, or that
// does not parse). The object is then kept whole: guessing would lose fields people set.
var ErrOwnershipUnknown = errors.New("field ownership unknown")

// DropUnowned returns a deep copy of obj without the fields no field manager owns: what
// the API server defaulted and nobody asked for (a Deployment's revisionHistoryLimit, a
// Pod template's dnsPolicy, a container's terminationMessagePath), which would otherwise
// turn every hand-written manifest into a much longer file than its author wrote.
//
// Ownership is the union of every metadata.managedFields entry, read with
// structured-merge-diff's own FieldsV1 parser. A field with owned children keeps only
// those children; an owned field with no owned children (a leaf, an atomic list or map)
// is kept whole; every other field is dropped. List items are matched by their key
// fields (k:), value (v:) or index (i:). For a core Secret, owning stringData.X counts as
// owning data.X, since the server moves stringData into data.
//
// existing is the same object's document as it is in Git (nil for a new document): a
// field present there is kept even when nobody owns it, so an edit never removes what a
// person wrote. apiVersion, kind, metadata.name and metadata.namespace are always kept.
//
// Client-side apply (kubectl apply without --server-side) records its fields as an
// Update computed after the server defaulted the request, so its entry claims the
// defaults too. For an object with a kubectl.kubernetes.io/last-applied-configuration
// annotation, the fields of the kubectl-client-side-apply Update entry therefore count
// as owned only where the last-applied configuration has them too (the same paths:
// maps by key, list items named as that entry names them, an item that leaves out a
// defaulted key field naming every recorded item it agrees with). Every other entry
// (kubectl edit, kubectl patch, a controller, a server-side apply) counts as recorded.
//
// An object without managedFields carries no information and is kept whole. When the
// managedFields cannot be read (see ErrOwnershipUnknown) the object is kept whole too and
// the error says why. When only the last-applied annotation of an object with a
// client-side apply entry cannot be read, ownership is taken as recorded and the error
// (also ErrOwnershipUnknown) says why. obj and existing
// are never modified; a nil obj yields nil.
func DropUnowned(obj *unstructured.Unstructured, existing map[string]any) (*unstructured.Unstructured, error) {
	if obj == nil {
		return nil, nil
	}
	applied, appliedErr := clientSideApplied(obj.Object)
	owned, err := ownedFields(obj.Object, applied)
	if err != nil || owned == nil {
		return &unstructured.Unstructured{Object: copyMap(obj.Object)}, err
	}
	out := keepMap(obj.Object, owned, existing)
	keepIdentity(out, obj.Object)
	return &unstructured.Unstructured{Object: out}, appliedErr
}

// ownedFields returns the union of the fields every managedFields entry owns, the
// client-side apply entry's narrowed to applied when that is not nil, or nil when the
// object has no managedFields.
func ownedFields(object map[string]any, applied map[string]any) (*fieldpath.Set, error) {
	metadata, _ := object["metadata"].(map[string]any)
	raw, present := metadata["managedFields"]
	if !present || raw == nil {
		return nil, nil
	}
	entries, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: managedFields is not a list", ErrOwnershipUnknown)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	apiVersion, _ := object["apiVersion"].(string)
	secret := isKind(object, "v1", "Secret")
	owned := &fieldpath.Set{}
	skipCluster := slices.ContainsFunc(entries, func(e any) bool { return !byClusterController(e) && !ofSubresource(e) })
	for i, entry := range entries {
		if skipCluster && byClusterController(entry) {
			continue
		}
		set, err := entryFields(entry, apiVersion)
		if err != nil {
			return nil, fmt.Errorf("%w: managedFields[%d]: %w", ErrOwnershipUnknown, i, err)
		}
		if applied != nil && isClientSideApply(entry) {
			set = appliedOwnership(set, applied, secret)
		}
		owned = owned.Union(set)
	}
	if secret {
		owned = withDataForStringData(owned)
	}
	return owned, nil
}

// clusterControllers are the field managers of the cluster's own control loops. What only
// they own is the cluster's record of its own work, never intent to deploy: a Deployment's
// deployment.kubernetes.io/revision annotation (bumped at every rollout), the volume a
// PersistentVolumeClaim was bound to and the binder's pv.kubernetes.io annotations (a
// restore elsewhere would wait for a volume that does not exist), the replicas a
// HorizontalPodAutoscaler set. Written to Git, such a field is a commit per rollout and,
// applied back by Flux or Argo CD, a tug of war with the controller. A field someone else
// owns too stays. An object only the cluster's controllers ever wrote (a namespace's
// kube-root-ca.crt, an owned ReplicaSet, captured on purpose) is theirs through and
// through, so there their entries count like any other.
func clusterControllers() []string {
	return []string{"kube-controller-manager", "cloud-controller-manager", "kube-scheduler", "kubelet"}
}

// ofSubresource reports whether a managedFields entry records writes through a subresource
// (status, scale): a controller outside the cluster's own that only reports on an object
// (csi-resizer on a PersistentVolumeClaim's status) has not written it, and does not make
// the fields only the cluster's controllers set someone else's business.
func ofSubresource(entry any) bool {
	m, _ := entry.(map[string]any)
	sub, _ := m["subresource"].(string)
	return sub != ""
}

// byClusterController reports whether a managedFields entry is one of clusterControllers'.
func byClusterController(entry any) bool {
	m, _ := entry.(map[string]any)
	manager, _ := m["manager"].(string)
	return slices.Contains(clusterControllers(), manager)
}

// entryFields parses the fields of one managedFields entry. Entries of another apiVersion
// are refused: their paths name that version's fields, which need not exist in this one.
func entryFields(entry any, apiVersion string) (*fieldpath.Set, error) {
	m, ok := entry.(map[string]any)
	if !ok {
		return nil, errors.New("not an object")
	}
	if v, _ := m["apiVersion"].(string); v != apiVersion {
		return nil, fmt.Errorf("apiVersion %q differs from the object's %q", v, apiVersion)
	}
	if t, _ := m["fieldsType"].(string); t != "FieldsV1" {
		return nil, fmt.Errorf("fieldsType %q is not FieldsV1", t)
	}
	fields, err := json.Marshal(m["fieldsV1"])
	if err != nil {
		return nil, fmt.Errorf("encoding fieldsV1: %w", err)
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader(fields)); err != nil {
		return nil, fmt.Errorf("parsing fieldsV1: %w", err)
	}
	return set, nil
}

// withDataForStringData adds data.X for every owned stringData.X (and data for an owned
// stringData): the API server stores stringData as data, so whoever set the one set the
// other.
func withDataForStringData(owned *fieldpath.Set) *fieldpath.Set {
	out := owned.Copy()
	stringData := fieldpath.PathElement{FieldName: strPtr("stringData")}
	data := fieldpath.PathElement{FieldName: strPtr("data")}
	owned.Iterate(func(p fieldpath.Path) {
		if len(p) > 0 && p[0].Equals(stringData) {
			out.Insert(append(fieldpath.Path{data}, p[1:]...))
		}
	})
	return out
}

// strPtr returns a pointer to s, for PathElement.FieldName.
func strPtr(s string) *string { return &s }

// keepIdentity copies apiVersion, kind, metadata.name and metadata.namespace from the
// original object into out: without them the document could never be found again.
func keepIdentity(out, object map[string]any) {
	for _, k := range []string{"apiVersion", "kind"} {
		if v, ok := object[k]; ok {
			out[k] = v
		}
	}
	metadata, ok := object["metadata"].(map[string]any)
	if !ok {
		return
	}
	outMeta, _ := out["metadata"].(map[string]any)
	if outMeta == nil {
		outMeta = map[string]any{}
	}
	for _, k := range []string{"name", "namespace"} {
		if v, ok := metadata[k]; ok {
			outMeta[k] = v
		}
	}
	if len(outMeta) > 0 {
		out["metadata"] = outMeta
	}
}

// ownership is what the managed fields say about one field: whether some manager owns it
// as a whole (member) and which of its children are owned.
type ownership struct {
	member   bool
	children *fieldpath.Set
}

// ownershipOf looks pe up among the fields owned is about.
func ownershipOf(owned *fieldpath.Set, pe fieldpath.PathElement) ownership {
	if owned == nil {
		return ownership{}
	}
	children, _ := owned.Children.Get(pe)
	if children != nil && children.Empty() {
		children = nil
	}
	return ownership{member: owned.Members.Has(pe), children: children}
}

// keepMap returns the entries of m that are owned (per owned, the fields below m) or
// present in existing (the same mapping in Git).
func keepMap(m map[string]any, owned *fieldpath.Set, existing map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		ex, inGit := existing[k]
		if kept, ok := keepField(v, ownershipOf(owned, fieldpath.PathElement{FieldName: &k}), ex, inGit); ok {
			out[k] = kept
		}
	}
	return out
}

// keepField decides one field (a map entry or a list item): recurse into owned children,
// keep an owned member whole, keep what Git already has, drop the rest.
func keepField(v any, own ownership, ex any, inGit bool) (any, bool) {
	switch {
	case own.children != nil:
		kept, nonEmpty := keepOwned(v, own.children, ex)
		return kept, nonEmpty || own.member || inGit
	case own.member:
		return copyValue(v), true
	case inGit:
		return keepPresent(v, ex), true
	}
	return nil, false
}

// keepOwned keeps the owned parts of a map or list; any other value is kept whole (its
// ownership says it has children, which a scalar cannot have).
func keepOwned(v any, owned *fieldpath.Set, ex any) (any, bool) {
	switch typed := v.(type) {
	case map[string]any:
		exMap, _ := ex.(map[string]any)
		kept := keepMap(typed, owned, exMap)
		return kept, len(kept) > 0
	case []any:
		exList, _ := ex.([]any)
		kept := keepList(typed, owned, exList)
		return kept, len(kept) > 0
	}
	return copyValue(v), true
}

// keepPresent keeps an unowned field that Git already has: a mapping keeps the keys Git
// has, anything else is kept whole with its current value.
func keepPresent(v, ex any) any {
	m, isMap := v.(map[string]any)
	exMap, exIsMap := ex.(map[string]any)
	if isMap && exIsMap {
		return keepMap(m, nil, exMap)
	}
	return copyValue(v)
}

// keepList keeps the list items that are owned or present in Git, matched to the managed
// fields by key fields, value or index, whichever the managed fields use for this list.
func keepList(items []any, owned *fieldpath.Set, existing []any) []any {
	kinds := elementKinds(owned)
	out := make([]any, 0, len(items))
	for i, item := range items {
		ex, inGit := counterpart(existing, item, i, kinds)
		if kept, ok := keepField(item, itemOwnership(owned, kinds, item, i), ex, inGit); ok {
			out = append(out, kept)
		}
	}
	return out
}

// listKinds says how the managed fields address the items of one list.
type listKinds struct {
	keyNames []string // the key fields of an associative list, from its first k: element
	byValue  bool
	byIndex  bool
}

// elementKinds reads which kinds of path elements owned uses for a list's items.
func elementKinds(owned *fieldpath.Set) listKinds {
	var kinds listKinds
	note := func(pe fieldpath.PathElement) {
		switch {
		case pe.Key != nil && kinds.keyNames == nil:
			for _, f := range *pe.Key {
				kinds.keyNames = append(kinds.keyNames, f.Name)
			}
		case pe.Value != nil:
			kinds.byValue = true
		case pe.Index != nil:
			kinds.byIndex = true
		}
	}
	owned.Members.Iterate(note)
	owned.Children.Iterate(note)
	return kinds
}

// itemOwnership finds what the managed fields say about item, the i-th item of a list.
func itemOwnership(owned *fieldpath.Set, kinds listKinds, item any, i int) ownership {
	for _, pe := range itemElements(kinds, item, i) {
		if own := ownershipOf(owned, pe); own.member || own.children != nil {
			return own
		}
	}
	return ownership{}
}

// itemElements returns the path elements that could name item in a list of these kinds.
func itemElements(kinds listKinds, item any, i int) []fieldpath.PathElement {
	var pes []fieldpath.PathElement
	if m, ok := item.(map[string]any); ok && kinds.keyNames != nil {
		if key, ok := keyOf(m, kinds.keyNames); ok {
			pes = append(pes, fieldpath.KeyElement(key...))
		}
	}
	if kinds.byValue && isScalar(item) {
		pes = append(pes, fieldpath.ValueElement(value.NewValueInterface(item)))
	}
	if kinds.byIndex {
		pes = append(pes, fieldpath.IndexElement(i))
	}
	return pes
}

// keyOf returns the key fields of an associative list item, sorted as the managed fields
// sort them; ok is false when the item lacks one.
func keyOf(item map[string]any, names []string) (value.FieldList, bool) {
	key := make(value.FieldList, 0, len(names))
	for _, name := range names {
		v, ok := item[name]
		if !ok || !isScalar(v) {
			return nil, false
		}
		key = append(key, value.Field{Name: name, Value: value.NewValueInterface(v)})
	}
	key.Sort()
	return key, true
}

// isScalar reports whether v is a JSON scalar (null, bool, number or string), the only
// values list keys and set items hold.
func isScalar(v any) bool {
	switch v.(type) {
	case nil, bool, string, int64, float64, int, int32, float32:
		return true
	}
	return false
}

// counterpart finds in existing (a list in Git) the item that is the same item as item,
// the i-th of the list in the cluster: by key fields for an associative list (a key field
// Git leaves out, such as a defaulted protocol, matches when that leaves one candidate),
// by value for a set, by position otherwise.
func counterpart(existing []any, item any, i int, kinds listKinds) (any, bool) {
	if len(existing) == 0 {
		return nil, false
	}
	m, isMap := item.(map[string]any)
	switch {
	case kinds.keyNames != nil && isMap:
		if at, ok := keyedMatch(existing, m, kinds.keyNames); ok {
			return existing[at], true
		}
		return nil, false
	case kinds.byValue && isScalar(item):
		for _, ex := range existing {
			if isScalar(ex) && value.Equals(value.NewValueInterface(ex), value.NewValueInterface(item)) {
				return ex, true
			}
		}
		return nil, false
	case i < len(existing):
		return existing[i], true
	}
	return nil, false
}

// keyedMatch finds the index of the item of candidates with item's key: an exact match,
// or else the only item whose key fields agree wherever both have them.
func keyedMatch(candidates []any, item map[string]any, names []string) (int, bool) {
	matches := keyedMatches(candidates, item, names)
	if len(matches) != 1 {
		return 0, false
	}
	return matches[0], true
}

// keyedMatches returns the indexes of the items of candidates that may be item: the one
// with item's exact key, or, when none has it, every item whose key fields agree
// wherever both have them.
func keyedMatches(candidates []any, item map[string]any, names []string) []int {
	var lenient []int
	for at, candidate := range candidates {
		m, ok := candidate.(map[string]any)
		if !ok {
			continue
		}
		exact, agrees := compareKeys(item, m, names)
		if exact {
			return []int{at}
		}
		if agrees {
			lenient = append(lenient, at)
		}
	}
	return lenient
}

// compareKeys reports whether ex has item's key fields with equal values (exact), and
// whether it at least has no key field with another value and one equal one (agrees).
func compareKeys(item, ex map[string]any, names []string) (exact, agrees bool) {
	exact, shared := true, 0
	for _, name := range names {
		exV, inEx := ex[name]
		v, inItem := item[name]
		switch {
		case !inEx || !inItem:
			exact = false
		case isScalar(v) && isScalar(exV) && value.Equals(value.NewValueInterface(v), value.NewValueInterface(exV)):
			shared++
		default:
			return false, false
		}
	}
	return exact, shared > 0
}
