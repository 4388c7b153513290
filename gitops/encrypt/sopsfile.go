package encrypt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/getsops/sops/v3"
	sopsaes "github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/common"
	sopsconfig "github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/stores"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"github.com/getsops/sops/v3/version"
	yaml "go.yaml.in/yaml/v3"
)

// EncryptedRegex selects the values sops encrypts: everything under a key
// named data, stringData or annotations. apiVersion, kind, type, name,
// namespace and labels stay readable and diffable. Annotation values are
// ciphertext (their keys stay readable) because tools copy whole objects into
// them — kubectl's last-applied configuration, kapp's original — and the
// operator cannot tell such a copy from a harmless note.
const EncryptedRegex = `^(data|stringData|annotations)$`

// legacyEncryptedRegex is the rule of files written before annotations were
// encrypted. Such a file is still the operator's own: its data key is reused
// on the next change, which moves it to EncryptedRegex.
const legacyEncryptedRegex = `^(data|stringData)$`

// yamlIndent matches the indentation of every other manifest the operator
// writes, so encrypted files look like their neighbours.
const yamlIndent = 2

// newStore returns sops' YAML store configured like the operator's writer.
func newStore() *sopsyaml.Store {
	return sopsyaml.NewStore(&sopsconfig.YAMLStoreConfig{Indent: yamlIndent})
}

// plainDoc is a parsed plaintext document: sops' tree of its single YAML
// document and its canonical form for comparisons and digests.
type plainDoc struct {
	branch    sops.TreeBranch
	canonical []byte
	doc       []byte
}

// again parses the document anew. sops encrypts a tree in place, so each encryption of one
// document, and each comparison with what an encryption left readable, needs its own tree.
func (p plainDoc) again() (plainDoc, error) {
	return parsePlain(p.doc)
}

// aliasesBounded reports whether every YAML document of doc decodes, every alias in it
// pointing outside itself and expanding within the YAML library's bounds. sops expands
// aliases without a bound: one anywhere in a file that contains itself overflows the
// stack (a fatal error, which no recover catches), so a file someone pushes to a folder
// would crash the operator at every start; one that doubles at each level exhausts memory.
// Every file goes through this before sops reads it. A file without '*' has no alias,
// and is not parsed here.
func aliasesBounded(doc []byte) bool {
	if !bytes.Contains(doc, []byte("*")) {
		return true
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	for {
		var v any
		switch err := dec.Decode(&v); {
		case errors.Is(err, io.EOF):
			return true
		case err != nil:
			return false
		}
	}
}

// parsePlain parses a plaintext document that is about to be encrypted.
// sops and YAML errors are not wrapped: their text can quote values.
func parsePlain(doc []byte) (plainDoc, error) {
	if !aliasesBounded(doc) {
		return plainDoc{}, fmt.Errorf("%w: not valid YAML, or an alias that contains itself or expands too far", ErrMalformedDocument)
	}
	branches, err := newStore().LoadPlainFile(doc)
	if err != nil {
		return plainDoc{}, fmt.Errorf("%w: not valid YAML", ErrMalformedDocument)
	}
	if len(branches) != 1 || len(branches[0]) == 0 {
		return plainDoc{}, fmt.Errorf("%w: want exactly one non-empty YAML document, found %d", ErrMalformedDocument, len(branches))
	}
	if stores.HasSopsTopLevelKey(branches[0]) {
		return plainDoc{}, ErrAlreadyEncrypted
	}
	canonical, err := canonicalize(doc)
	if err != nil {
		return plainDoc{}, err
	}
	return plainDoc{branch: branches[0], canonical: canonical, doc: doc}, nil
}

// canonicalize renders the content of a single YAML document as JSON with
// sorted keys: comments, key order, quoting and indentation do not change
// it, any value change does. It decodes with the same YAML library sops and
// the writer use, so both sides of a comparison read scalars alike.
func canonicalize(doc []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("%w: not valid YAML", ErrMalformedDocument)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("%w: holds a value without a JSON form (non-string key or non-finite number)", ErrMalformedDocument)
	}
	return buf.Bytes(), nil
}

// loadEncrypted parses a sops-encrypted YAML file.
func loadEncrypted(doc []byte) (sops.Tree, error) {
	if !aliasesBounded(doc) {
		return sops.Tree{}, fmt.Errorf("%w: not valid YAML, or an alias that contains itself or expands too far", ErrMalformedDocument)
	}
	tree, err := newStore().LoadEncryptedFile(doc)
	switch {
	case errors.Is(err, sops.MetadataNotFound):
		return sops.Tree{}, ErrNotEncrypted
	case err != nil:
		return sops.Tree{}, fmt.Errorf("%w: not a readable sops YAML file", ErrMalformedDocument)
	}
	return tree, nil
}

// emitEncrypted renders an encrypted tree as a sops YAML file.
func emitEncrypted(tree sops.Tree) ([]byte, error) {
	out, err := newStore().EmitEncryptedFile(tree)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot render the encrypted file", ErrMalformedDocument)
	}
	return out, nil
}

// emitPlain renders decrypted branches, without the operator's comments (digest, proof).
func emitPlain(branches sops.TreeBranches) ([]byte, error) {
	clean := make(sops.TreeBranches, len(branches))
	for i, branch := range branches {
		clean[i] = withoutOperatorComments(branch)
	}
	out, err := newStore().EmitPlainFile(clean)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot render the decrypted document", ErrMalformedDocument)
	}
	return out, nil
}

// newMetadata describes a file encrypted by the operator: one key group of
// age recipients and EncryptedRegex.
func newMetadata(r Recipients) (sops.Metadata, error) {
	keys, err := r.masterKeys()
	if err != nil {
		return sops.Metadata{}, err
	}
	group := make(sops.KeyGroup, 0, len(keys))
	for _, key := range keys {
		group = append(group, key)
	}
	return sops.Metadata{
		KeyGroups:      []sops.KeyGroup{group},
		EncryptedRegex: EncryptedRegex,
		Version:        version.Version,
	}, nil
}

// hasOperatorRules says whether md encrypts what this package encrypts (or
// did before annotations were added), so its data key and ciphertext can be
// reused; callers move a legacy file to EncryptedRegex.
func hasOperatorRules(md sops.Metadata) bool {
	return (md.EncryptedRegex == EncryptedRegex || md.EncryptedRegex == legacyEncryptedRegex) &&
		md.UnencryptedSuffix == "" && md.EncryptedSuffix == "" &&
		md.UnencryptedRegex == "" &&
		md.UnencryptedCommentRegex == "" && md.EncryptedCommentRegex == "" &&
		!md.MACOnlyEncrypted
}

// encryptNew encrypts a plaintext tree under a fresh data key wrapped for r.
func encryptNew(plain plainDoc, r Recipients, o options) ([]byte, error) {
	md, err := newMetadata(r)
	if err != nil {
		return nil, err
	}
	return encryptUnder(plain, md, r, o)
}

// encryptKeepingRules encrypts a plaintext tree under a fresh data key wrapped for r,
// selecting the values to encrypt with the rules of rules (a file someone else wrote):
// a file that encrypts more than the operator would must not come out encrypting less.
func encryptKeepingRules(plain plainDoc, r Recipients, rules sops.Metadata, o options) ([]byte, error) {
	md, err := newMetadata(r)
	if err != nil {
		return nil, err
	}
	md.EncryptedRegex, md.UnencryptedRegex = rules.EncryptedRegex, rules.UnencryptedRegex
	md.EncryptedSuffix, md.UnencryptedSuffix = rules.EncryptedSuffix, rules.UnencryptedSuffix
	md.EncryptedCommentRegex, md.UnencryptedCommentRegex = rules.EncryptedCommentRegex, rules.UnencryptedCommentRegex
	md.MACOnlyEncrypted = rules.MACOnlyEncrypted
	return encryptUnder(plain, md, r, o)
}

// encryptUnder encrypts a plaintext tree with md's rules under a fresh data key wrapped
// for md's key group (r).
func encryptUnder(plain plainDoc, md sops.Metadata, r Recipients, o options) ([]byte, error) {
	tree := sops.Tree{Branches: sops.TreeBranches{plain.branch}, Metadata: md}
	dataKey, errs := tree.GenerateDataKey()
	if len(errs) > 0 {
		return nil, fmt.Errorf("wrapping a new data key for %d recipients: %w", len(r), errors.Join(errs...))
	}
	return sealTree(&tree, plain, dataKey, sopsaes.NewCipher(), o)
}

// sealTree adds the digest (when a digest key is set), encrypts the values
// and the MAC with sops, and renders the file. Reusing a cipher that
// decrypted the previous version keeps unchanged values' ciphertext.
func sealTree(tree *sops.Tree, plain plainDoc, dataKey []byte, cipher sops.Cipher, o options) ([]byte, error) {
	if o.digestKey != nil {
		d, err := newDigest(o.digestKey, plain.canonical)
		if err != nil {
			return nil, err
		}
		tree.Branches[0] = withDigest(tree.Branches[0], d)
	}
	tree.Branches[0] = withKeyProof(tree.Branches[0], o.proofKey, dataKey, fileRecipients(tree.Metadata))
	tree.Metadata.Version = version.Version
	err := common.EncryptTree(common.EncryptTreeOpts{Tree: tree, Cipher: cipher, DataKey: dataKey})
	if err != nil {
		// sops' message can quote a value it failed to encrypt.
		return nil, fmt.Errorf("%w: sops could not encrypt a value (unsupported YAML type)", ErrMalformedDocument)
	}
	return emitEncrypted(*tree)
}

// openTree recovers the data key with ids and decrypts tree in place,
// checking sops' MAC. cipher remembers the IV of every value it decrypts,
// which is what lets re-encryption reproduce unchanged ciphertext.
func openTree(tree *sops.Tree, ids Identities, cipher sops.Cipher) ([]byte, error) {
	dataKey, err := recoverDataKey(&tree.Metadata, ids)
	if err != nil {
		return nil, err
	}
	_, err = common.DecryptTree(common.DecryptTreeOpts{
		Tree:        tree,
		KeyServices: []keyservice.KeyServiceClient{ageKeyService{ids: ids.parsed()}},
		Cipher:      cipher,
	})
	if err != nil {
		// sops' message holds the computed MAC, a hash of the plaintext.
		return nil, ErrIntegrity
	}
	return dataKey, nil
}

// recoverDataKey unwraps the file's data key with ids only: never with keys
// from the environment or home directory, which sops would otherwise try.
func recoverDataKey(md *sops.Metadata, ids Identities) ([]byte, error) {
	if ids.Len() == 0 {
		return nil, ErrNoIdentity
	}
	svc := []keyservice.KeyServiceClient{ageKeyService{ids: ids.parsed()}}
	key, err := md.GetDataKeyWithKeyServices(svc, []string{sopsage.KeyTypeIdentifier})
	if err != nil {
		return nil, fmt.Errorf("%w: none of %d identities opens a file encrypted for [%s]",
			ErrIdentityMismatch, ids.Len(), strings.Join(fileRecipients(*md), ", "))
	}
	return key, nil
}

// fileRecipients lists the age recipients a file is encrypted for, sorted.
func fileRecipients(md sops.Metadata) []string {
	var out []string
	for _, group := range md.KeyGroups {
		for _, key := range group {
			if ageKey, ok := key.(*sopsage.MasterKey); ok {
				out = append(out, ageKey.Recipient)
			}
		}
	}
	sort.Strings(out)
	return out
}

// onlyRecipients says whether md is wrapped for exactly r and nothing else.
func onlyRecipients(md sops.Metadata, r Recipients) bool {
	return len(md.KeyGroups) == 1 && md.MasterKeyCount() == len(r) &&
		slices.Equal(fileRecipients(md), []string(r))
}

// rewrap replaces md's key groups with one group for r, holding the same
// data key. Recipients the file already had keep their wrapped key as it
// is, so the diff shows exactly who was added and removed.
func rewrap(md *sops.Metadata, dataKey []byte, r Recipients) error {
	existing := existingAgeKeys(*md)
	group := make(sops.KeyGroup, 0, len(r))
	for i, recipient := range r {
		key, ok := existing[recipient]
		if !ok {
			fresh, err := sopsage.MasterKeyFromRecipient(recipient)
			if err != nil {
				return fmt.Errorf("%w: recipient %d is not an age public key", ErrMalformedKey, i)
			}
			key = fresh
		}
		if err := key.EncryptIfNeeded(dataKey); err != nil {
			return fmt.Errorf("wrapping the data key for recipient %d: %w", i, err)
		}
		group = append(group, key)
	}
	md.KeyGroups = []sops.KeyGroup{group}
	md.ShamirThreshold = 0
	md.DataKey = dataKey
	return nil
}

// existingAgeKeys indexes a file's age keys that hold a wrapped data key. A file of several
// key groups (sops' Shamir secret sharing) has none: each of its keys wraps a share of the
// data key, not the key itself, and kept as they are they would open nothing.
func existingAgeKeys(md sops.Metadata) map[string]*sopsage.MasterKey {
	out := map[string]*sopsage.MasterKey{}
	if len(md.KeyGroups) != 1 {
		return out
	}
	for _, group := range md.KeyGroups {
		for _, key := range group {
			if ageKey, ok := key.(*sopsage.MasterKey); ok && ageKey.EncryptedKey != "" {
				out[ageKey.Recipient] = ageKey
			}
		}
	}
	return out
}
