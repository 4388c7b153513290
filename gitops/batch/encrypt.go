package batch

import (
	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

// Encryption is a target's resolved age keys, handed to the writer by the GitTarget
// controller. Without it (nil) the writer refuses every sensitive object: nothing is ever
// written in plaintext.
type Encryption struct {
	// Recipients are the public keys every encrypted file is wrapped for: the spec's and
	// those derived from Identities.
	Recipients encrypt.Recipients
	// Identities open existing files, so unchanged Secrets cause no commit and changed
	// ones only change the values that changed. May be empty.
	Identities encrypt.Identities
	// DigestKey keys the change-detection digest when no identity is held; nil otherwise.
	DigestKey encrypt.DigestKey
}
