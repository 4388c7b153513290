package encrypt

import "errors"

// Sentinel errors name the expected ways encryption can be impossible, so the
// controller can turn them into an EncryptionReady=False reason and the
// webhook into a denial, without parsing messages. Every error this package
// returns wraps one of them, and none of their messages carries a plaintext
// value, a private key or a digest key: messages name positions (recipient
// index, Secret data key, line number), never contents.
var (
	// ErrNoRecipients means there is nobody to encrypt for: writing the
	// Secret would need a plaintext fallback, which never happens.
	ErrNoRecipients = errors.New("no age recipients")
	// ErrMalformedKey means a recipient, identity or digest key cannot be
	// parsed; the message says which one by position only.
	ErrMalformedKey = errors.New("malformed key")
	// ErrNoIdentity means an operation needs to open a file (read its data
	// key) but no age identity was given.
	ErrNoIdentity = errors.New("no age identity")
	// ErrIdentityMismatch means identities were given but none of them
	// unwraps the file's data key: the file was encrypted for other
	// recipients.
	ErrIdentityMismatch = errors.New("no identity matches the file's recipients")
	// ErrIntegrity means an encrypted file failed sops' integrity check (MAC
	// or a value's authentication tag): it was corrupted or tampered with.
	ErrIntegrity = errors.New("encrypted file failed its integrity check")
	// ErrMalformedDocument means the input is not a single YAML mapping
	// document that sops can process.
	ErrMalformedDocument = errors.New("malformed YAML document")
	// ErrNotEncrypted means a document expected to be a sops file has no
	// sops metadata block.
	ErrNotEncrypted = errors.New("document is not sops-encrypted")
	// ErrAlreadyEncrypted means a document given as plaintext already has a
	// sops metadata block; encrypting it again would nest encryption.
	ErrAlreadyEncrypted = errors.New("document is already sops-encrypted")
	// ErrNoDigestKey means Update was asked to compare a file without an
	// identity and without a digest key, so it could neither decrypt nor
	// check the digest; guessing would mean a commit on every resync.
	ErrNoDigestKey = errors.New("no identity and no digest key to detect changes")
	// ErrNoDigest means an encrypted file carries no digest comment (a person's file, or one
	// written without a digest key), so a digest key cannot tell what it holds.
	ErrNoDigest = errors.New("the encrypted file carries no digest")
)
