package encrypt

import (
	"context"
	"errors"

	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/keyservice"
	"google.golang.org/grpc"
)

// errNotAgeKey is returned for master keys other than age: the operator
// holds no credentials for KMS, PGP or Vault, and must not pick them up from
// its environment.
var errNotAgeKey = errors.New("only age keys are handled in-process")

// errEncryptUnsupported is returned for wrap requests: wrapping needs only
// public keys and goes through sops' age key source directly.
var errEncryptUnsupported = errors.New("this key service only unwraps")

// ageKeyService is an in-process sops key service that unwraps data keys
// with the identities it was given and nothing else. sops' own local key
// service would read SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, ~/.config/sops and
// ~/.ssh instead, which must never decide what the operator can decrypt.
type ageKeyService struct {
	ids sopsage.ParsedIdentities
}

// Decrypt unwraps one age-wrapped data key with the held identities.
func (s ageKeyService) Decrypt(_ context.Context, req *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	ageKey, ok := req.GetKey().GetKeyType().(*keyservice.Key_AgeKey)
	if !ok {
		return nil, errNotAgeKey
	}
	if len(s.ids) == 0 {
		// An empty identity list would make sops fall back to the environment.
		return nil, ErrNoIdentity
	}
	key := &sopsage.MasterKey{Recipient: ageKey.AgeKey.GetRecipient(), EncryptedKey: string(req.GetCiphertext())}
	s.ids.ApplyToMasterKey(key)
	plaintext, err := key.Decrypt()
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plaintext}, nil
}

// Encrypt is not offered; see errEncryptUnsupported.
func (ageKeyService) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, errEncryptUnsupported
}
