package encrypt

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	"github.com/getsops/sops/v3"
)

// DigestKeySize is the length of a digest key: a full HMAC-SHA256 key.
const DigestKeySize = 32

// digestSaltSize is the per-write random salt length; 128 bits make two
// writes of the same plaintext unlinkable.
const digestSaltSize = 16

// digestVersion names the scheme, so it can change without misreading old
// files: an unknown version just counts as "changed".
const digestVersion = "v1"

// digestDomain separates these HMACs from any other use of the same key.
const digestDomain = "gitops-reverser.dev/digest/v1\x00"

// DigestCommentKey labels the digest comment at the top of an encrypted
// file. It is a comment, not a field, so it never reaches the cluster when
// Flux applies the decrypted object, and sops' MAC ignores it.
const DigestCommentKey = "gitops-reverser.dev/digest"

// digestCommentPrefix is the comment text before the value, as sops' YAML
// store holds comments: without the leading "#".
const digestCommentPrefix = " " + DigestCommentKey + ": "

// DigestKey is a secret kept by the operator (in a Secret, never in Git)
// that keys the change-detection digest stored with each encrypted file.
// Without it a digest is just random bytes; see the package documentation.
// It prints as "DigestKey(redacted)" under every fmt verb.
type DigestKey []byte

// GenerateDigestKey creates a random digest key, for the controller to store
// in a Secret the first time it needs one.
func GenerateDigestKey() (DigestKey, error) {
	key := make(DigestKey, DigestKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating digest key: %w", err)
	}
	return key, nil
}

// ParseDigestKey validates a digest key read from a Secret; a wrong length
// yields ErrMalformedKey without echoing the bytes.
func ParseDigestKey(b []byte) (DigestKey, error) {
	if len(b) != DigestKeySize {
		return nil, fmt.Errorf("%w: digest key has %d bytes, want %d", ErrMalformedKey, len(b), DigestKeySize)
	}
	return DigestKey(append([]byte(nil), b...)), nil
}

// String hides the key.
func (DigestKey) String() string { return "DigestKey(redacted)" }

// Format makes every fmt verb print String, so no verb can dump the key.
func (k DigestKey) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// digest is one stored digest: the random salt and the HMAC.
type digest struct {
	salt []byte
	mac  []byte
}

// newDigest computes a digest of canonical plaintext under a fresh salt.
func newDigest(key DigestKey, canonical []byte) (digest, error) {
	salt := make([]byte, digestSaltSize)
	if _, err := rand.Read(salt); err != nil {
		return digest{}, fmt.Errorf("generating digest salt: %w", err)
	}
	return digest{salt: salt, mac: digestMAC(key, salt, canonical)}, nil
}

// digestMAC is HMAC-SHA256(key, domain || salt || canonical plaintext). The
// salt has a fixed length, so the concatenation is unambiguous.
func digestMAC(key DigestKey, salt, canonical []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(digestDomain))
	h.Write(salt)
	h.Write(canonical)
	return h.Sum(nil)
}

// matches says whether canonical plaintext is what d was computed over, in
// constant time.
func (d digest) matches(key DigestKey, canonical []byte) bool {
	return hmac.Equal(d.mac, digestMAC(key, d.salt, canonical))
}

// comment renders d as the comment sops keeps at the top of the file.
func (d digest) comment() sops.Comment {
	enc := base64.RawURLEncoding
	value := digestVersion + ":" + enc.EncodeToString(d.salt) + ":" + enc.EncodeToString(d.mac)
	return sops.Comment{Value: digestCommentPrefix + value}
}

// parseDigestComment reads a digest comment; ok is false for any other
// comment or an unknown version.
func parseDigestComment(c sops.Comment) (digest, bool) {
	value, found := strings.CutPrefix(c.Value, digestCommentPrefix)
	if !found {
		return digest{}, false
	}
	parts := strings.Split(strings.TrimSpace(value), ":")
	if len(parts) != 3 || parts[0] != digestVersion {
		return digest{}, false
	}
	salt, err1 := base64.RawURLEncoding.DecodeString(parts[1])
	mac, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || len(salt) != digestSaltSize || len(mac) != sha256.Size {
		return digest{}, false
	}
	return digest{salt: salt, mac: mac}, true
}

// findDigest returns the digest comment among the top-level items of a
// document, if any.
func findDigest(branch sops.TreeBranch) (digest, bool) {
	for _, item := range branch {
		if c, ok := item.Key.(sops.Comment); ok {
			if d, ok := parseDigestComment(c); ok {
				return d, true
			}
		}
	}
	return digest{}, false
}

// withoutDigest returns branch without digest comments (any version), so
// decrypted output equals what was encrypted and a new digest replaces the
// old one.
func withoutDigest(branch sops.TreeBranch) sops.TreeBranch {
	out := make(sops.TreeBranch, 0, len(branch))
	for _, item := range branch {
		if c, ok := item.Key.(sops.Comment); ok && strings.HasPrefix(c.Value, digestCommentPrefix) {
			continue
		}
		out = append(out, item)
	}
	return out
}

// withDigest puts d's comment first in branch, replacing any old one.
func withDigest(branch sops.TreeBranch, d digest) sops.TreeBranch {
	out := sops.TreeBranch{{Key: d.comment(), Value: nil}}
	return append(out, withoutDigest(branch)...)
}
