package manifest

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// jsonRoundTrip is what objectValue must equal: obj encoded as JSON and decoded with
// UseNumber.
func jsonRoundTrip(obj *unstructured.Unstructured) (any, error) {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b)
}

func TestObjectValueIsTheJSONRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "keeps strings, booleans and nulls", value: map[string]any{"s": "x", "t": true, "n": nil, "e": ""}},
		{name: "writes integers exactly, the largest int64 too", value: []any{int64(0), int64(-7), int64(math.MaxInt64)}},
		{name: "writes floats as encoding/json does", value: []any{1.5, 3.0, 1e20, 1e21, 1e-7, -0.000001, 123456789.125}},
		{name: "converts nested mappings and lists", value: map[string]any{"a": []any{map[string]any{"b": []any{int64(1), "c"}}}}},
		{name: "writes a nil mapping or list as null, an empty one as empty",
			value: map[string]any{"m": map[string]any(nil), "l": []any(nil), "em": map[string]any{}, "el": []any{}}},
		{name: "takes the round trip for a string that is not UTF-8", value: map[string]any{"bad": "a\xffb"}},
		{name: "takes the round trip for a key that is not UTF-8", value: map[string]any{"k\xfe": "v"}},
		{name: "takes the round trip for Go types informers do not hold", value: map[string]any{"i": 3, "f": float32(0.5), "l": []string{"x"}}},
		{name: "refuses NaN as encoding/json does", value: math.NaN(), wantErr: true},
		{name: "refuses an infinity as encoding/json does", value: []any{math.Inf(1)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "app"}, "data": tt.value}}
			got, err := objectValue(obj)
			want, wantErr := jsonRoundTrip(obj)
			if tt.wantErr {
				require.Error(t, wantErr)
				assert.ErrorIs(t, err, ErrInvalidObject)
				return
			}
			require.NoError(t, wantErr)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// FuzzObjectValue checks objectValue against the JSON round trip for every object the
// watcher could hand over (JSON decoded into unstructured, as informers do). Seeds:
// testdata/fuzz/FuzzObjectValue.
func FuzzObjectValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(append([]byte(`{"apiVersion":"v1","kind":"ConfigMap","data":`), append(data, '}')...)); err != nil {
			return
		}
		got, err := objectValue(obj)
		want, wantErr := jsonRoundTrip(obj)
		if wantErr != nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}
