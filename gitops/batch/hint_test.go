package batch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
)

func TestEncryptionHint(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"points at the identity Secret or a fresh file when no key can tell what changed", encrypt.ErrNoDigestKey, "put an identity the file is encrypted for"},
		{"points at the recipients' identities when none the operator holds opens the file", encrypt.ErrIdentityMismatch, "add an identity of one of the file's recipients"},
		{"says a file that fails its integrity check was changed by hand", fmt.Errorf("opening: %w", encrypt.ErrIntegrity), "changed by hand or damaged"},
		{"names the fields that give recipients", encrypt.ErrNoRecipients, "spec.encryption.age.recipients or secretRef"},
		{"adds nothing to a reason it cannot improve", errors.New("sops: something else"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encryptionHint(tt.err)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
		})
	}
}
