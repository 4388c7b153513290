package encrypt

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/getsops/sops/v3"
)

// readableValues lists the paths of the values enc, a sops file of plain, holds as plain
// holds them: the values the file's rules left readable. A path joins keys and list
// indexes with NUL, which no YAML key of a Kubernetes object holds. Comments are not
// values and are not compared.
func readableValues(enc []byte, plain sops.TreeBranch) (map[string]bool, error) {
	tree, err := loadEncrypted(enc)
	if err != nil {
		return nil, err
	}
	if len(tree.Branches) != 1 {
		return nil, fmt.Errorf("%w: want exactly one YAML document, found %d", ErrMalformedDocument, len(tree.Branches))
	}
	readable := map[string]bool{}
	collectReadable(tree.Branches[0], plain, "", readable)
	return readable, nil
}

// collectReadable adds to readable the paths under path where got holds want's value.
func collectReadable(got, want any, path string, readable map[string]bool) {
	switch w := want.(type) {
	case sops.TreeBranch:
		g, ok := got.(sops.TreeBranch)
		if !ok {
			return
		}
		values := valuesByKey(g)
		for _, item := range w {
			if _, comment := item.Key.(sops.Comment); comment {
				continue
			}
			key := fmt.Sprint(item.Key)
			if v, found := values[key]; found {
				collectReadable(v, item.Value, path+"\x00"+key, readable)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return
		}
		for i := range w {
			if _, comment := w[i].(sops.Comment); !comment {
				collectReadable(g[i], w[i], path+"\x00"+strconv.Itoa(i), readable)
			}
		}
	default:
		if reflect.DeepEqual(got, want) {
			readable[path] = true
		}
	}
}

// valuesByKey indexes a branch's values by their key as text; comments are left out.
func valuesByKey(branch sops.TreeBranch) map[string]any {
	values := make(map[string]any, len(branch))
	for _, item := range branch {
		if _, comment := item.Key.(sops.Comment); !comment {
			values[fmt.Sprint(item.Key)] = item.Value
		}
	}
	return values
}
