package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrInvalidObject is returned when an object cannot be written as a
// manifest: it is nil, or lacks apiVersion, kind or metadata.name, without
// which the document could never be found again.
var ErrInvalidObject = errors.New("invalid object")

// indent is the indentation of written documents, kyaml's default.
const indent = 2

// topLevelOrder is the order people write an object's top-level keys in;
// remaining keys follow, sorted.
func topLevelOrder() []string {
	return []string{"apiVersion", "kind", "metadata", "spec", "data", "stringData", "binaryData"}
}

// metadataOrder is the order people write metadata keys in; remaining keys
// follow, sorted.
func metadataOrder() []string {
	return []string{"name", "namespace", "labels", "annotations"}
}

// Encode renders obj as a new YAML document in the order people write by
// hand: apiVersion, kind, metadata (name, namespace, labels, annotations,
// then the rest sorted), spec, data, stringData, binaryData, then the
// remaining keys sorted. Nested mappings are sorted by key as kubectl does,
// except that list items start with their name ("- name: api"), the way
// containers, env and ports are written by hand.
// It uses 2-space indentation, block style, sequences at their parent key's
// indentation (kyaml's and kubectl's compact style), quotes strings only
// where YAML 1.1 or 1.2 would read them as something else, and ends without
// a "---". The printing is yaml.v3's, the printer kyaml uses. Use
// EncodeStyled to follow the sequence indentation of an existing folder.
func Encode(obj *unstructured.Unstructured) ([]byte, error) {
	return EncodeStyled(obj, Style{})
}

// checkObject refuses objects that cannot be written and found again.
func checkObject(obj *unstructured.Unstructured) error {
	if obj == nil || obj.Object == nil {
		return fmt.Errorf("%w: object is nil", ErrInvalidObject)
	}
	apiVersion, kind, name := obj.GetAPIVersion(), obj.GetKind(), obj.GetName()
	switch {
	case apiVersion == "":
		return fmt.Errorf("%w: %s %q has no apiVersion", ErrInvalidObject, kind, name)
	case kind == "":
		return fmt.Errorf("%w: %s %q has no kind", ErrInvalidObject, apiVersion, name)
	case name == "":
		return fmt.Errorf("%w: %s %s has no metadata.name", ErrInvalidObject, apiVersion, kind)
	}
	if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
		return fmt.Errorf("%w: %s %q: invalid apiVersion %q: %w", ErrInvalidObject, kind, name, apiVersion, err)
	}
	return nil
}

// sortMappings sorts the keys of every mapping in the tree by their bytes,
// like kubectl's output, instead of yaml.v3's "natural" order.
func sortMappings(node *yaml.Node) {
	if node == nil {
		return
	}
	if node.Kind == yaml.MappingNode {
		pairs := keyValuePairs(node)
		slices.SortStableFunc(pairs, func(a, b [2]*yaml.Node) int {
			return strings.Compare(a[0].Value, b[0].Value)
		})
		setPairs(node, pairs)
	}
	for _, child := range node.Content {
		sortMappings(child)
	}
}

// nameFirstInLists moves the "name" key to the front of every mapping that
// is an item of a sequence, anywhere in the tree.
func nameFirstInLists(node *yaml.Node) {
	if node == nil {
		return
	}
	for _, child := range node.Content {
		if node.Kind == yaml.SequenceNode {
			orderKeys(child, []string{"name"})
		}
		nameFirstInLists(child)
	}
}

// orderKeys moves the given keys, when present, to the front of a mapping
// in the given order, keeping the relative order of the other keys.
func orderKeys(mapping *yaml.Node, first []string) {
	if mapping == nil || mapping.Kind != yaml.MappingNode {
		return
	}
	rank := func(key string) int {
		if i := slices.Index(first, key); i >= 0 {
			return i
		}
		return len(first)
	}
	pairs := keyValuePairs(mapping)
	slices.SortStableFunc(pairs, func(a, b [2]*yaml.Node) int {
		return rank(a[0].Value) - rank(b[0].Value)
	})
	setPairs(mapping, pairs)
}

// mappingValue returns the mapping value of key in a mapping, or nil.
func mappingValue(mapping *yaml.Node, key string) *yaml.Node {
	if mapping == nil || mapping.Kind != yaml.MappingNode {
		return nil
	}
	for _, pair := range keyValuePairs(mapping) {
		if pair[0].Value == key && pair[1].Kind == yaml.MappingNode {
			return pair[1]
		}
	}
	return nil
}

// keyValuePairs returns a mapping's content as (key, value) pairs.
func keyValuePairs(mapping *yaml.Node) [][2]*yaml.Node {
	pairs := make([][2]*yaml.Node, 0, len(mapping.Content)/2)
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		pairs = append(pairs, [2]*yaml.Node{mapping.Content[i], mapping.Content[i+1]})
	}
	return pairs
}

// setPairs replaces a mapping's content with pairs.
func setPairs(mapping *yaml.Node, pairs [][2]*yaml.Node) {
	content := make([]*yaml.Node, 0, 2*len(pairs))
	for _, pair := range pairs {
		content = append(content, pair[0], pair[1])
	}
	mapping.Content = content
}
