package encrypt

import (
	"slices"

	sopsaes "github.com/getsops/sops/v3/aes"
	"github.com/getsops/sops/v3/stores"
)

// Option adjusts Encrypt and Update.
type Option func(*options)

// options holds what Options set.
type options struct {
	digestKey DigestKey
	// proofKey signs the data key of written files (WithKeyProof); nil: no proof.
	proofKey []byte
}

// WithDigestKey makes written files carry a change-detection digest keyed
// by key, and lets Update detect "unchanged" without an identity. Without
// it, Update needs identities to avoid rewriting unchanged files.
func WithDigestKey(key DigestKey) Option {
	return func(o *options) { o.digestKey = key }
}

// collect applies opts.
func collect(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Encrypt encrypts one plaintext YAML document for r under a fresh data key.
// Only values under data, stringData and annotations become ciphertext; the output is a
// standard sops YAML file that `sops -d` opens with any matching age
// identity. Prefer Update for files that may already exist: Encrypt always
// produces new ciphertext.
func Encrypt(plainDoc []byte, r Recipients, opts ...Option) ([]byte, error) {
	plain, recipients, err := readRequest(plainDoc, r)
	if err != nil {
		return nil, err
	}
	return encryptNew(plain, recipients, collect(opts))
}

// readRequest parses what is to be encrypted and for whom.
func readRequest(doc []byte, r Recipients) (plainDoc, Recipients, error) {
	recipients, err := ParseRecipients(r)
	if err != nil {
		return plainDoc{}, nil, err
	}
	plain, err := parsePlain(doc)
	if err != nil {
		return plainDoc{}, nil, err
	}
	return plain, recipients, nil
}

// Decrypt opens a sops YAML file with ids only (never keys from the
// environment) after checking sops' MAC, and returns the plaintext document
// without the operator's comments (digest, data-key proof). Errors: ErrNotEncrypted, ErrNoIdentity,
// ErrIdentityMismatch, ErrIntegrity, ErrMalformedDocument.
func Decrypt(encDoc []byte, ids Identities) ([]byte, error) {
	tree, err := loadEncrypted(encDoc)
	if err != nil {
		return nil, err
	}
	if _, err := openTree(&tree, ids, sopsaes.NewCipher()); err != nil {
		return nil, err
	}
	return emitPlain(tree.Branches)
}

// HoldsEncrypted says whether any YAML document of doc has a top-level sops key: a file a
// person encrypted document by document (Flux decrypts each on its own) is one, though
// sops, which reads the first document's metadata only, would not call it encrypted
// (IsEncrypted). Input sops cannot read safely is not (aliasesBounded).
func HoldsEncrypted(doc []byte) bool {
	if !aliasesBounded(doc) {
		return false
	}
	branches, err := newStore().LoadPlainFile(doc)
	return err == nil && slices.ContainsFunc(branches, stores.HasSopsTopLevelKey)
}

// IsEncrypted says whether doc is a sops file (its first YAML document has a
// top-level sops key), the same test sops itself applies. Unparseable input
// is not encrypted, nor is input sops cannot read safely (aliasesBounded).
func IsEncrypted(doc []byte) bool {
	if !aliasesBounded(doc) {
		return false
	}
	branches, err := newStore().LoadPlainFile(doc)
	return err == nil && len(branches) > 0 && stores.HasSopsTopLevelKey(branches[0])
}
