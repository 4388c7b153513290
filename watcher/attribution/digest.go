package attribution

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

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
				return UpdateKey(old.GetUID(), old.GetResourceVersion(), d), true
			}
		}
	case Delete:
		if old != nil && old.GetUID() != "" {
			return DeleteKey(old.GetUID()), true
		}
	}
	return Key{}, false
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
