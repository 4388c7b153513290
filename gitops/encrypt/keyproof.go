package encrypt

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/getsops/sops/v3"
)

// A file's data key is reused for a new value only when the operator can tell it chose
// that key itself, for the recipients it is wrapped for now. The recipients are public
// (.sops.yaml), so anyone who can push may write a valid sops file under a data key they
// keep, wrapped for them: an operator re-sealing the cluster's new value under that key
// would hand it to them. The proof is a comment holding HMAC(K, recipients, data key), K
// derived from an age identity the operator holds; sops keeps comments, so `sops edit`,
// which keeps the data key and the recipients, keeps the proof valid. A file without a
// valid proof (a person's, an attacker's, one written before proofs existed or under
// another recipient set) is encrypted afresh when its value changes.
//
// The recipients are in the proof because a data key is known to everyone it was ever
// wrapped for. The writer wraps a key for one set only: a change of recipients, added or
// removed, gives every file a new data key (Renew), and a file wrapped for another set is
// never re-sealed under its key (Update). So a recipient who is removed knows only keys
// proven for sets that hold it, and a file it puts back as it was before its removal,
// re-wrapped with `sops updatekeys` for the current recipients or not, carries no proof
// for them: its key is not reused, whatever set the recipients return to later. What the
// proof cannot tell is a key someone re-wrapped by hand (`sops updatekeys`, which needs a
// recipient's identity) for a party outside the spec: that party knows the key, and a
// file put back as it was before that re-wrap still proves it. Whoever holds an identity
// can hand out what it opens anyway.

// keyProofCommentKey labels the proof comment at the top of an encrypted file.
const keyProofCommentKey = "gitops-reverser.dev/data-key"

// keyProofCommentPrefix is the comment text before the value, as sops holds comments.
const keyProofCommentPrefix = " " + keyProofCommentKey + ": "

// keyProofVersion names the scheme; an unknown version is no proof. v1 proved the data
// key alone, without the recipients: such a proof no longer counts.
const keyProofVersion = "v2"

// keyProofDomain separates these HMACs, and the derivation of K, from any other use.
const keyProofDomain = "gitops-reverser.dev/data-key/v2\x00"

// proofKey is K for one identity: HMAC-SHA256 keyed by the identity's secret encoding.
func proofKey(identity string) []byte {
	h := hmac.New(sha256.New, []byte(identity))
	h.Write([]byte(keyProofDomain + "key"))
	return h.Sum(nil)
}

// keyProof is HMAC-SHA256(K, domain || each recipient, length first || data key), over
// the recipients in the order fileRecipients gives them (sorted).
func keyProof(key, dataKey []byte, recipients []string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(keyProofDomain))
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(recipients)))
	h.Write(n[:])
	for _, r := range recipients {
		binary.BigEndian.PutUint32(n[:], uint32(len(r)))
		h.Write(n[:])
		h.Write([]byte(r))
	}
	h.Write(dataKey)
	return h.Sum(nil)
}

// WithKeyProof makes written files carry a proof that the operator, holding ids, chose
// their data key for their recipients, so Update may reuse it for a new value (see
// keyproof.go). The first identity signs; every held identity verifies, so proofs survive
// adding an identity. Update and Renew sign with the identities they are given; Encrypt,
// given none, needs it.
func WithKeyProof(ids Identities) Option {
	return func(o *options) {
		if ids.Len() > 0 {
			o.proofKey = proofKey(ids.ids[0].String())
		}
	}
}

// withKeyProof puts the proof of dataKey wrapped for recipients under key first in branch,
// replacing any other; a nil key only removes an old one, which could not verify the new
// data key anyway.
func withKeyProof(branch sops.TreeBranch, key, dataKey []byte, recipients []string) sops.TreeBranch {
	out := make(sops.TreeBranch, 0, len(branch)+1)
	if key != nil {
		value := keyProofVersion + ":" + base64.RawURLEncoding.EncodeToString(keyProof(key, dataKey, recipients))
		out = append(out, sops.TreeItem{Key: sops.Comment{Value: keyProofCommentPrefix + value}})
	}
	for _, item := range branch {
		if c, ok := item.Key.(sops.Comment); ok && strings.HasPrefix(c.Value, keyProofCommentPrefix) {
			continue
		}
		out = append(out, item)
	}
	return out
}

// provenKey says whether branch carries a proof, under one of ids, of dataKey wrapped for
// recipients: the operator chose it for them. Constant time in the proof's bytes.
func provenKey(branch sops.TreeBranch, ids Identities, dataKey []byte, recipients []string) bool {
	for _, item := range branch {
		c, ok := item.Key.(sops.Comment)
		if !ok {
			continue
		}
		value, found := strings.CutPrefix(c.Value, keyProofCommentPrefix)
		if !found {
			continue
		}
		version, encoded, _ := strings.Cut(strings.TrimSpace(value), ":")
		mac, err := base64.RawURLEncoding.DecodeString(encoded)
		if version != keyProofVersion || err != nil || len(mac) != sha256.Size {
			continue
		}
		for _, id := range ids.ids {
			if hmac.Equal(mac, keyProof(proofKey(id.String()), dataKey, recipients)) {
				return true
			}
		}
	}
	return false
}

// isOperatorComment says whether c is one of the comments the operator keeps at the top
// of an encrypted file (digest, data-key proof), which decrypted output leaves out.
func isOperatorComment(c sops.Comment) bool {
	return strings.HasPrefix(c.Value, digestCommentPrefix) || strings.HasPrefix(c.Value, keyProofCommentPrefix)
}

// withoutOperatorComments returns branch without the operator's comments, so decrypted
// output equals what was encrypted.
func withoutOperatorComments(branch sops.TreeBranch) sops.TreeBranch {
	out := make(sops.TreeBranch, 0, len(branch))
	for _, item := range branch {
		if c, ok := item.Key.(sops.Comment); ok && isOperatorComment(c) {
			continue
		}
		out = append(out, item)
	}
	return out
}
