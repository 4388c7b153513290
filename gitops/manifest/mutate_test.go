package manifest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestRandomEditsOfTheGoldenInputs applies random changes (removed, added
// and changed keys, removed, inserted, moved and changed list items,
// values changing type, awkward strings) to the objects of the golden
// inputs and of testdata/tricky (unusual but valid layouts), and checks
// every Upsert like FuzzUpsert does, in-place editing included. The seed
// is fixed, so failures reproduce; change it locally to explore.
func TestRandomEditsOfTheGoldenInputs(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "upsert-*", "input.yaml"))
	require.NoError(t, err)
	tricky, err := filepath.Glob(filepath.Join("testdata", "tricky", "*.yaml"))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, input := range append(inputs, tricky...) {
		content, err := os.ReadFile(input)
		require.NoError(t, err)
		f, err := parseFile(content)
		require.NoError(t, err)
		for _, d := range f.docs {
			if d.info.Empty {
				continue
			}
			for round := range 30 {
				value := deepCopy(d.value)
				for range 1 + rng.IntN(3) {
					value = mutate(rng, value, 0)
				}
				obj := &unstructured.Unstructured{Object: value.(map[string]any)}
				t.Run(fmt.Sprintf("%s/%s/%d", filepath.Base(filepath.Dir(input))+"/"+filepath.Base(input), d.info.Identity, round), func(t *testing.T) {
					checkUpsert(t, content, toObject(t, obj), true)
				})
			}
		}
	}
}

// toObject round-trips obj through JSON as the watcher would hand it over.
func toObject(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	jsonBytes, err := json.Marshal(obj.Object)
	require.NoError(t, err)
	out := &unstructured.Unstructured{}
	require.NoError(t, out.UnmarshalJSON(jsonBytes))
	return out
}

// deepCopy copies a JSON-like value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[k] = deepCopy(item)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = deepCopy(item)
		}
		return out
	default:
		return v
	}
}

// awkwardStrings are values that need quoting, blocks or care.
func awkwardStrings() []string {
	return []string{"", "yes", "a: b", "# x", "- x", "multi\nline\n", "multi\nline", "keep\n\n", " lead\nx\n",
		"trail ", "null", "0777", "1e3", "日本語", `"q"`, "'", "---", "...", "<<", "@x", "%x", "a #b", "x\ty", "plain", "123"}
}

// randomValue returns a scalar, or at depth < 3 sometimes a collection.
func randomValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(10); {
	case n < 5:
		s := awkwardStrings()
		return s[rng.IntN(len(s))]
	case n == 5:
		return json.Number(fmt.Sprint(rng.IntN(2000) - 1000))
	case n == 6:
		return rng.IntN(2) == 0
	case n == 7:
		return nil
	case n == 8 && depth < 3:
		return map[string]any{"name": fmt.Sprintf("n%d", rng.IntN(5)), "v": randomValue(rng, depth+1)}
	default:
		if depth >= 3 {
			return "deep"
		}
		return []any{randomValue(rng, depth+1), randomValue(rng, depth+1)}
	}
}

// mutate changes one random place of v and returns it.
func mutate(rng *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		return mutateMap(rng, x, depth)
	case []any:
		return mutateList(rng, x, depth)
	default:
		return randomValue(rng, depth)
	}
}

// mutateMap removes, adds or changes a key, or descends into one. The
// identity of an object (apiVersion, kind, name, namespace) is kept.
func mutateMap(rng *rand.Rand, m map[string]any, depth int) any {
	keys := make([]string, 0, len(m))
	for k := range m {
		if depth == 0 && (k == "apiVersion" || k == "kind") {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) == 0 || rng.IntN(4) == 0 {
		m[fmt.Sprintf("new%d", rng.IntN(3))] = randomValue(rng, depth+1)
		return m
	}
	k := keys[rng.IntN(len(keys))]
	switch {
	case depth == 0 && k == "metadata":
		if md, ok := m[k].(map[string]any); ok {
			md[fmt.Sprintf("label%d", rng.IntN(2))] = randomValue(rng, 2)
		}
	case rng.IntN(4) == 0:
		delete(m, k)
	default:
		m[k] = mutate(rng, m[k], depth+1)
	}
	return m
}

// mutateList removes, inserts, swaps or changes items.
func mutateList(rng *rand.Rand, l []any, depth int) any {
	if len(l) == 0 {
		return append(l, randomValue(rng, depth+1))
	}
	i := rng.IntN(len(l))
	switch rng.IntN(5) {
	case 0:
		return slices.Delete(l, i, i+1)
	case 1:
		return slices.Insert(l, i, deepCopy(mutate(rng, deepCopy(l[rng.IntN(len(l))]), depth+1)))
	case 2:
		j := rng.IntN(len(l))
		l[i], l[j] = l[j], l[i]
		return l
	default:
		l[i] = mutate(rng, l[i], depth+1)
		return l
	}
}

// FuzzEdit changes the first object of arbitrary content at random (the
// changes of TestRandomEditsOfTheGoldenInputs, driven by seed) and checks
// the Upsert like FuzzUpsert does: the fuzzer explores layouts through
// content and edits through seed. Seeds: the golden and tricky inputs,
// and testdata/fuzz/FuzzEdit/.
func FuzzEdit(f *testing.F) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "upsert-*", "input.yaml"))
	require.NoError(f, err)
	tricky, err := filepath.Glob(filepath.Join("testdata", "tricky", "*.yaml"))
	require.NoError(f, err)
	for i, input := range append(inputs, tricky...) {
		content, err := os.ReadFile(input)
		require.NoError(f, err)
		f.Add(content, uint64(i))
	}
	f.Fuzz(func(t *testing.T, content []byte, seed uint64) {
		before, err := parseFile(content)
		if err != nil {
			return
		}
		for _, d := range before.docs {
			if d.info.Empty {
				continue
			}
			rng := rand.New(rand.NewPCG(seed, seed>>32))
			value := deepCopy(d.value)
			for range 1 + rng.IntN(3) {
				value = mutate(rng, value, 0)
			}
			checkUpsert(t, content, toObject(t, &unstructured.Unstructured{Object: value.(map[string]any)}), true)
			return
		}
	})
}
