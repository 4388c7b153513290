package attribution

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
)

// Digest is the SHA-256 of an object's sanitized form: what the writer would commit, so
// server-side bookkeeping (resourceVersion, managedFields, status) never breaks a join.
type Digest [sha256.Size]byte

// DigestOf computes the digest of obj. Both sides decode JSON the same way (unstructured,
// int64 where a number is integral) and encoding/json sorts map keys, so equal objects give
// equal digests whichever side computed them.
func DigestOf(obj *unstructured.Unstructured) (Digest, error) {
	b, err := json.Marshal(sanitize.Object(obj).Object)
	if err != nil {
		return Digest{}, fmt.Errorf("encoding %s %s/%s for its digest: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return sha256.Sum256(b), nil
}

// KeyForEvent is the join key of a watch event: old is nil for an add. ok is false when
// the event cannot be joined (no UID, or an object that cannot be encoded).
func KeyForEvent(old, obj *unstructured.Unstructured) (Key, bool) {
	if obj == nil || obj.GetUID() == "" {
		return Key{}, false
	}
	d, err := DigestOf(obj)
	if err != nil {
		return Key{}, false
	}
	if old == nil {
		return createKeyWith(obj, d), true
	}
	return UpdateKey(obj.GetUID(), old.GetResourceVersion(), d), true
}

// KeyForRequest is the join key of an admitted request; obj and old are the request's
// object and oldObject (nil when absent). ok is false for what cannot be joined.
func KeyForRequest(op Op, obj, old *unstructured.Unstructured) (Key, bool) {
	switch op {
	case Create:
		if obj != nil && obj.GetUID() != "" {
			if d, err := DigestOf(obj); err == nil {
				return createKeyWith(obj, d), true
			}
		}
	case Update:
		if obj != nil && old != nil && old.GetUID() != "" {
			d, err := DigestOf(obj)
			if err == nil {
				k := UpdateKey(old.GetUID(), old.GetResourceVersion(), d)
				before, err := DigestOf(old)
				k.Neutral = err == nil && before == d
				return k, true
			}
		}
	case Delete:
		if old != nil && old.GetUID() != "" {
			k := DeleteKey(old.GetUID())
			k.First = old.GetDeletionTimestamp() == nil
			return k, true
		}
	}
	return Key{}, false
}

// ScaledOnly reports whether the update from old to obj changed nothing but spec.replicas
// (and what the API server keeps: resourceVersion, generation, managedFields, status), as
// a write through the scale subresource of a Deployment, ReplicaSet, StatefulSet or a
// custom resource scaled at that path does: the only update a Scale record (ScaleKey) may
// be joined to. A scale subresource at another path is not joined. Pure.
func ScaledOnly(old, obj *unstructured.Unstructured) bool {
	if old == nil || obj == nil || old.GetUID() != obj.GetUID() {
		return false
	}
	before, _, errBefore := unstructured.NestedFieldNoCopy(old.Object, "spec", "replicas")
	after, _, errAfter := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas")
	if errBefore != nil || errAfter != nil || reflect.DeepEqual(before, after) {
		return false
	}
	return reflect.DeepEqual(withoutScale(old), withoutScale(obj))
}

// ReplicasOf is obj's spec.replicas, 0 when absent or not an integer: a Scale omits it when
// 0, and the object the watcher sees after the write has it, so both sides key a scale alike
// (ScaleKey).
func ReplicasOf(obj *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	return n
}

// withoutScale is obj without spec.replicas and what the API server changes with it.
func withoutScale(obj *unstructured.Unstructured) map[string]any {
	c := obj.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "spec", "replicas")
	unstructured.RemoveNestedField(c.Object, "status")
	for _, f := range []string{"resourceVersion", "generation", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	return c.Object
}

// createKeyWith is the key of the create of obj, whose digest is d.
func createKeyWith(obj *unstructured.Unstructured, d Digest) Key {
	k := CreateKey(obj.GetUID())
	k.Digest, k.APIVersion = d, obj.GetAPIVersion()
	return k
}

// SameContent reports whether the update keyed by k left the sanitized object as old had
// it: a status update or a write of server-owned metadata, which changes nothing in Git
// and is not counted as an unattributed change. Only worth asking after a failed join.
func SameContent(k Key, old *unstructured.Unstructured) bool {
	if k.Op != Update || old == nil {
		return false
	}
	d, err := DigestOf(old)
	return err == nil && d == k.Digest
}
