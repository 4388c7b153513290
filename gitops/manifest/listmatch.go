package manifest

import (
	"encoding/json"
	"fmt"
)

// mergeKeys are the fields Kubernetes' strategic merge patch matches list
// items by (containers and env by name, ports by containerPort or port,
// volume mounts by mountPath, conditions by type...), in the order they are
// tried: the first one that identifies every item, old and new, is used.
func mergeKeys() []string {
	return []string{"name", "containerPort", "port", "mountPath", "devicePath", "ip", "key", "type", "topologyKey"}
}

// matchItems pairs the items of a list in the file (old) with those of
// the object (want): result[i] is the index in old of the item that
// becomes want[i], or -1 for a new item. Items are matched by their merge
// key when the list has one, so an edit to one container stays an edit to
// it wherever it moves; otherwise equal items are matched in order
// (longest common subsequence) and the remaining ones position by
// position between them, so a changed item is edited rather than
// rewritten.
func matchItems(old, want []any) []int {
	if key := mergeKeyOf(old, want); key != "" {
		return matchByKey(old, want, key)
	}
	return matchInOrder(old, want)
}

// mergeKeyOf returns the first of mergeKeys that every item of both lists
// has, as a scalar, with no two items of a list sharing a value; "" when
// none does.
func mergeKeyOf(old, want []any) string {
	for _, key := range mergeKeys() {
		if identifies(old, key) && identifies(want, key) {
			return key
		}
	}
	return ""
}

// identifies reports whether key is a unique scalar field of every item.
func identifies(items []any, key string) bool {
	seen := map[string]bool{}
	for _, item := range items {
		id, ok := itemKey(item, key)
		if !ok || seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}

// itemKey returns the value of key in a list item, as text.
func itemKey(item any, key string) (string, bool) {
	object, ok := item.(map[string]any)
	if !ok {
		return "", false
	}
	switch v := object[key].(type) {
	case string:
		return "s:" + v, true
	case json.Number:
		return "n:" + normalNumber(v), true
	case bool:
		return fmt.Sprintf("b:%t", v), true
	default:
		return "", false
	}
}

// normalNumber writes integers the same whatever their spelling ("0x1F",
// "31"), so that they match.
func normalNumber(n json.Number) string {
	if i, err := n.Int64(); err == nil {
		return fmt.Sprint(i)
	}
	if f, err := n.Float64(); err == nil {
		return fmt.Sprint(f)
	}
	return n.String()
}

// matchByKey matches items with the same merge key value.
func matchByKey(old, want []any, key string) []int {
	index := map[string]int{}
	for j, item := range old {
		id, _ := itemKey(item, key)
		index[id] = j
	}
	result := make([]int, len(want))
	for i, item := range want {
		id, _ := itemKey(item, key)
		j, ok := index[id]
		if !ok {
			j = -1
		}
		result[i] = j
	}
	return result
}

// matchInOrder matches equal items along a longest common subsequence,
// then pairs the unmatched items between two matches position by
// position.
func matchInOrder(old, want []any) []int {
	result := commonSubsequence(old, want)
	lastOld := -1
	for i := 0; i < len(want); {
		if result[i] >= 0 {
			lastOld = result[i]
			i++
			continue
		}
		end := i
		for end < len(want) && result[end] < 0 {
			end++
		}
		nextOld := len(old)
		if end < len(want) {
			nextOld = result[end]
		}
		for k := i; k < end && lastOld+1+k-i < nextOld; k++ {
			result[k] = lastOld + 1 + k - i
		}
		i = end
	}
	return result
}

// maxMatchCells bounds the work of commonSubsequence (its table has one
// cell per pair of items); longer lists are matched by position.
const maxMatchCells = 1 << 18

// positional matches nothing: every item of want is paired by position
// later, in matchInOrder.
func positional(_, m int) []int {
	result := make([]int, m)
	for i := range result {
		result[i] = -1
	}
	return result
}

// commonSubsequence returns, for each item of want, the index of the
// equal item of old it is matched to along a longest common subsequence,
// or -1.
func commonSubsequence(old, want []any) []int {
	n, m := len(old), len(want)
	if n*m > maxMatchCells {
		return positional(n, m)
	}
	lengths := make([][]int, n+1)
	for j := range lengths {
		lengths[j] = make([]int, m+1)
	}
	for j := n - 1; j >= 0; j-- {
		for i := m - 1; i >= 0; i-- {
			if equalValues(old[j], want[i]) {
				lengths[j][i] = lengths[j+1][i+1] + 1
			} else {
				lengths[j][i] = max(lengths[j+1][i], lengths[j][i+1])
			}
		}
	}
	result := make([]int, m)
	for i := range result {
		result[i] = -1
	}
	for j, i := 0, 0; j < n && i < m; {
		switch {
		case equalValues(old[j], want[i]):
			result[i] = j
			i++
			j++
		case lengths[j+1][i] >= lengths[j][i+1]:
			j++
		default:
			i++
		}
	}
	return result
}
