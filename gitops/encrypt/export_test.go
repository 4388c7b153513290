package encrypt

import (
	"github.com/getsops/sops/v3"
	sopsaes "github.com/getsops/sops/v3/aes"
	"github.com/getsops/sops/v3/cmd/sops/common"
)

// LegacyEncryptedRegex exposes the rule of files written before annotations were encrypted.
const LegacyEncryptedRegex = legacyEncryptedRegex

// EncryptUnderLegacyRule writes plainDoc the way releases before annotation encryption did:
// a sops file whose encrypted_regex is legacyEncryptedRegex, so tests can start from such a file.
func EncryptUnderLegacyRule(plainDoc []byte, r Recipients) ([]byte, error) {
	return EncryptUnderRule(plainDoc, r, legacyEncryptedRegex)
}

// EncryptUnderRule writes plainDoc as a sops file with encrypted_regex regex, as a person
// with the sops CLI might.
func EncryptUnderRule(plainDoc []byte, r Recipients, regex string) ([]byte, error) {
	return EncryptUnderMetadata(plainDoc, r, func(md *sops.Metadata) { md.EncryptedRegex = regex })
}

// EncryptUnderMetadata writes plainDoc as a sops file whose rules edit sets, starting from
// the operator's, as a person with the sops CLI and a .sops.yaml of their own might.
func EncryptUnderMetadata(plainDoc []byte, r Recipients, edit func(*sops.Metadata)) ([]byte, error) {
	plain, err := parsePlain(plainDoc)
	if err != nil {
		return nil, err
	}
	md, err := newMetadata(r)
	if err != nil {
		return nil, err
	}
	edit(&md)
	return encryptTree(plain, md)
}

// EncryptShamir writes plainDoc as a sops file of one key group per recipient, any two of
// which open it (sops' Shamir secret sharing, from a .sops.yaml with key_groups and
// shamir_threshold: 2), as a person with the sops CLI might.
func EncryptShamir(plainDoc []byte, r Recipients) ([]byte, error) {
	plain, err := parsePlain(plainDoc)
	if err != nil {
		return nil, err
	}
	keys, err := r.masterKeys()
	if err != nil {
		return nil, err
	}
	md := sops.Metadata{ShamirThreshold: 2, EncryptedRegex: EncryptedRegex}
	for _, k := range keys {
		md.KeyGroups = append(md.KeyGroups, sops.KeyGroup{k})
	}
	return encryptTree(plain, md)
}

// encryptTree encrypts plain under a fresh data key wrapped as md says.
func encryptTree(plain plainDoc, md sops.Metadata) ([]byte, error) {
	tree := sops.Tree{Branches: sops.TreeBranches{plain.branch}, Metadata: md}
	dataKey, errs := tree.GenerateDataKey()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if err := common.EncryptTree(common.EncryptTreeOpts{Tree: &tree, Cipher: sopsaes.NewCipher(), DataKey: dataKey}); err != nil {
		return nil, err
	}
	return emitEncrypted(tree)
}

// DataKey unwraps a file's data key with ids, so tests can tell whether two files share one.
func DataKey(encDoc []byte, ids Identities) ([]byte, error) {
	tree, err := loadEncrypted(encDoc)
	if err != nil {
		return nil, err
	}
	return recoverDataKey(&tree.Metadata, ids)
}
