package manifest

import (
	"encoding/json"
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Document returns the document of content (a possibly multi-document YAML file) that
// defines id, as client-go's unstructured objects hold values (numbers as int64 or
// float64), or nil when no document defines id. The writer uses it to tell what a file
// already says about an object before deciding what to leave out of it.
//
// Errors wrap ErrUnparseable, ErrUnsupportedDocument or ErrDuplicateIdentity, like Upsert.
func Document(content []byte, id Identity) (map[string]any, error) {
	f, err := parseFile(content)
	if err != nil {
		return nil, err
	}
	i, err := f.find(id)
	if err != nil || i < 0 {
		return nil, err
	}
	raw, err := json.Marshal(f.docs[i].value)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnparseable, id, err)
	}
	var doc map[string]any
	if err := utiljson.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnparseable, id, err)
	}
	return doc, nil
}
