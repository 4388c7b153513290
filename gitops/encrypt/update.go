package encrypt

import (
	"bytes"
	"errors"

	"github.com/getsops/sops/v3"
	sopsaes "github.com/getsops/sops/v3/aes"
)

// Update returns the encrypted file that should hold newPlainDoc, given the
// file's current content (nil or empty when there is none), producing as
// little ciphertext churn as the keys allow:
//
//   - ids can open the file: plaintexts are compared; equal → existingEnc,
//     false. Otherwise, when the file is wrapped for exactly r and proves ids
//     chose its data key for them (keyproof.go), the key is reused and only
//     the values that changed get new ciphertext (sops re-uses the IV of a
//     value whose path and plaintext are unchanged); the sops block gets a
//     new lastmodified and mac. Without such a proof the document is
//     encrypted afresh: the key may be someone else's, or known to a
//     recipient no longer in r.
//   - no identity opens it: the digest comment is checked with the
//     WithDigestKey key; a match → existingEnc, false. Without a digest key,
//     a file the held identities cannot open is rewritten for r, and with
//     no identities at all Update returns ErrNoDigestKey rather than
//     rewriting on every resync.
//   - otherwise (no file, a plaintext file, an unreadable or tampered file,
//     a stale digest) the document is encrypted afresh for r.
//
// Recipients changing while the plaintext does not is not Update's concern:
// NeedsUpdateKeys and UpdateKeys handle it, in a commit that says so. r
// should include ids.Recipients(), or the operator cannot reopen what it
// writes and each change re-encrypts every value.
func Update(existingEnc []byte, newPlainDoc []byte, r Recipients, ids *Identities, opts ...Option) (out []byte, changed bool, err error) {
	plain, recipients, err := readRequest(newPlainDoc, r)
	if err != nil {
		return nil, false, err
	}
	o := collect(opts)
	if ids != nil {
		WithKeyProof(*ids)(&o) // what it writes, it can reuse the key of
	}
	tree, err := loadEncrypted(existingEnc)
	if err != nil {
		// No file, a plaintext one or an unreadable one: the cluster is the truth.
		return encryptFresh(plain, recipients, o)
	}
	if ids != nil && ids.Len() > 0 {
		out, changed, err := updateOpened(existingEnc, tree, plain, recipients, *ids, o)
		if !errors.Is(err, ErrIdentityMismatch) {
			return out, changed, err
		}
	}
	return updateByDigest(existingEnc, tree, plain, recipients, ids != nil && ids.Len() > 0, o)
}

// encryptFresh encrypts under a new data key and reports a change.
func encryptFresh(plain plainDoc, r Recipients, o options) ([]byte, bool, error) {
	out, err := encryptNew(plain, r, o)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// updateOpened is Update when ids can open the file. A file failing its
// integrity check is rewritten from the cluster's plaintext.
func updateOpened(existingEnc []byte, tree sops.Tree, plain plainDoc, r Recipients, ids Identities, o options) ([]byte, bool, error) {
	cipher := sopsaes.NewCipher()
	rules := tree.Metadata // openTree's decryption leaves the metadata as it was
	dataKey, err := openTree(&tree, ids, cipher)
	switch {
	case errors.Is(err, ErrIntegrity):
		return freshUnderRules(plain, r, rules, o)
	case err != nil:
		return nil, false, err
	}
	if len(tree.Branches) != 1 {
		return freshUnderRules(plain, r, rules, o)
	}
	same, err := samePlaintext(tree.Branches, plain)
	switch {
	case err != nil:
		return nil, false, err
	case same:
		return existingEnc, false, nil
	}
	if !hasOperatorRules(tree.Metadata) || !onlyRecipients(tree.Metadata, r) ||
		!provenKey(tree.Branches[0], ids, dataKey, fileRecipients(tree.Metadata)) {
		// A key wrapped for others than r is known to someone r does not hold, or would be
		// handed to someone who should not have had it before; one the operator cannot
		// tell it chose may be someone else's (keyproof.go): a new value needs a new key.
		return freshUnderRules(plain, r, rules, o)
	}
	out, err := resealUnderSameKey(tree.Metadata, plain, dataKey, cipher, o)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// resealUnderSameKey encrypts plain under the data key of a file with the operator's rules
// (md), moved to the current rule, for the recipients it is wrapped for: values whose
// plaintext and path cipher saw while decrypting keep their ciphertext.
func resealUnderSameKey(md sops.Metadata, plain plainDoc, dataKey []byte, cipher sops.Cipher, o options) ([]byte, error) {
	md.EncryptedRegex = EncryptedRegex // a legacy file moves to the current rule
	next := sops.Tree{Branches: sops.TreeBranches{plain.branch}, Metadata: md}
	return sealTree(&next, plain, dataKey, cipher, o)
}

// samePlaintext compares decrypted branches with the new document in
// canonical form.
func samePlaintext(decrypted sops.TreeBranches, plain plainDoc) (bool, error) {
	old, err := emitPlain(decrypted)
	if err != nil {
		return false, err
	}
	oldCanonical, err := canonicalize(old)
	if err != nil {
		return false, err
	}
	return bytes.Equal(oldCanonical, plain.canonical), nil
}

// updateByDigest is Update when no identity opens the file.
func updateByDigest(existingEnc []byte, tree sops.Tree, plain plainDoc, r Recipients, hadIdentities bool, o options) ([]byte, bool, error) {
	if o.digestKey == nil {
		if !hadIdentities {
			return nil, false, ErrNoDigestKey
		}
		// The held identities cannot open it: rewrite for the current recipients.
		return freshUnderRules(plain, r, tree.Metadata, o)
	}
	if len(tree.Branches) == 1 {
		if d, ok := findDigest(tree.Branches[0]); ok && d.matches(o.digestKey, plain.canonical) {
			return existingEnc, false, nil
		}
	}
	return freshUnderRules(plain, r, tree.Metadata, o)
}

// freshUnderRules encrypts plain under a new data key for r, as the next version of a file
// whose rules were md. A file someone wrote with rules of their own keeps them when they hide
// at least what the operator's rule hides (hidesAtLeast): whoever chose to encrypt more
// (labels, say) does not find it readable after the object's next change. Other rules give
// way to the operator's, and so does anything that goes wrong trying theirs. Which values a
// rule hides is not guessed from the rule: sops encrypts the document both ways, and the
// values each left as they were are compared.
func freshUnderRules(plain plainDoc, r Recipients, md sops.Metadata, o options) ([]byte, bool, error) {
	if keepableRules(md) {
		if theirs, ok := underTheirRules(plain, r, md, o); ok {
			return theirs, true, nil
		}
	}
	return encryptFresh(plain, r, o)
}

// keepableRules says whether md holds someone else's rules the writer may keep: not its
// own, with a MAC over every value (mac_only_encrypted would leave the readable fields, the
// object's name and namespace among them, outside it, and md is not authenticated: anyone
// who can push may have set it) and no rule on comments, which could encrypt the writer's
// own comments or make sops refuse the file. Pure.
func keepableRules(md sops.Metadata) bool {
	return !hasOperatorRules(md) && !md.MACOnlyEncrypted &&
		md.UnencryptedCommentRegex == "" && md.EncryptedCommentRegex == ""
}

// underTheirRules is plain encrypted for r under md's rules, and whether it may be written
// so: those rules hide at least what the operator's rule hides (hidesAtLeast) and leave the
// writer's comments readable (keepsOperatorComments). plain is left unencrypted.
func underTheirRules(plain plainDoc, r Recipients, md sops.Metadata, o options) ([]byte, bool) {
	var trees [3]plainDoc // sops encrypts a tree in place
	for i := range trees {
		again, err := plain.again()
		if err != nil {
			return nil, false
		}
		trees[i] = again
	}
	theirs, err := encryptKeepingRules(trees[0], r, md, o)
	if err != nil {
		return nil, false
	}
	ours, err := encryptNew(trees[1], r, o)
	if err != nil {
		return nil, false
	}
	readableTheirs, err := readableValues(theirs, trees[2].branch)
	if err != nil {
		return nil, false
	}
	readableOurs, err := readableValues(ours, trees[2].branch)
	if err != nil {
		return nil, false
	}
	return theirs, hidesAtLeast(readableTheirs, readableOurs) && keepsOperatorComments(theirs, o)
}

// keepsOperatorComments says whether enc holds the writer's digest readable, where o asks
// for one: rules that encrypt top-level comments (an unencrypted_regex, say) would hide it,
// and the writer, no longer finding it, would rewrite the file at every listing. The
// data-key proof may be hidden: the writer reuses a data key only in a file under its own
// rules (updateOpened), so it never needs the proof of one under someone else's.
func keepsOperatorComments(enc []byte, o options) bool {
	tree, err := loadEncrypted(enc)
	if err != nil || len(tree.Branches) != 1 {
		return false
	}
	_, ok := findDigest(tree.Branches[0])
	return o.digestKey == nil || ok
}

// hidesAtLeast says whether a rule that leaves the values at the paths of readable as they
// are hides every value the operator's rule hides (the paths it leaves are readableOurs)
// and leaves readable the fields naming the object, by which the writer's folder index
// finds its file. Pure.
func hidesAtLeast(readable, readableOurs map[string]bool) bool {
	for path := range readable {
		if !readableOurs[path] {
			return false
		}
	}
	for _, path := range []string{"\x00apiVersion", "\x00kind", "\x00metadata\x00name", "\x00metadata\x00namespace"} {
		if readableOurs[path] && !readable[path] {
			return false
		}
	}
	return true
}

// UpdateKeys has the effect of `sops updatekeys`: it re-wraps the file's
// data key for newRecipients, so values, lastmodified and mac keep their
// exact ciphertext and only the recipient list in the sops block changes.
// Recipients kept from before keep their wrapped key too. It needs an
// identity that opens the file; a file already wrapped for exactly
// newRecipients is returned unchanged. Removing a recipient this way does
// not revoke it (it could have kept the data key), and adding one hands it
// the key: the writer uses Renew, which rotates the key at any recipient
// change. The file's data-key proof no longer verifies for the new set, so
// Update does not reuse the key (keyproof.go).
func UpdateKeys(existingEnc []byte, ids Identities, newRecipients Recipients) ([]byte, error) {
	r, err := ParseRecipients(newRecipients)
	if err != nil {
		return nil, err
	}
	tree, err := loadEncrypted(existingEnc)
	if err != nil {
		return nil, err
	}
	if onlyRecipients(tree.Metadata, r) {
		return existingEnc, nil
	}
	dataKey, err := recoverDataKey(&tree.Metadata, ids)
	if err != nil {
		return nil, err
	}
	if err := rewrap(&tree.Metadata, dataKey, r); err != nil {
		return nil, err
	}
	return emitEncrypted(tree)
}

// UsesEarlierRule says whether an encrypted file was written under the rule before
// annotation values were encrypted, so Renew would move it to EncryptedRegex.
func UsesEarlierRule(existingEnc []byte) bool {
	tree, err := loadEncrypted(existingEnc)
	return err == nil && tree.Metadata.EncryptedRegex == legacyEncryptedRegex
}

// Renew brings a file in step with newRecipients and the current rule, as the writer does
// when a folder's recipients change. When they changed at all, the file is encrypted under
// a new data key (the effect of `sops rotate`): a removed recipient may have kept the old
// key, so no value written from then on is readable to it, and an added one is never handed
// a key the operator proved for a set without it, which a removal could bring back
// (keyproof.go). A file someone wrote with other rules keeps them when they may be kept,
// as at a change (freshUnderRules). A file under the earlier
// rule, for the same recipients, keeps its data key and gets its annotation values
// encrypted. It needs an identity that opens the file, and a MAC that holds (ErrIntegrity).
func Renew(existingEnc []byte, ids Identities, newRecipients Recipients, opts ...Option) ([]byte, error) {
	r, err := ParseRecipients(newRecipients)
	if err != nil {
		return nil, err
	}
	tree, err := loadEncrypted(existingEnc)
	if err != nil {
		return nil, err
	}
	changed := !onlyRecipients(tree.Metadata, r)
	cipher := sopsaes.NewCipher()
	// The MAC is checked whichever way the file is renewed: renewing one that fails it
	// would hand what someone changed there to the new recipients (a key-material Secret
	// renamed past the writer's checks, a document encrypted under another data key).
	dataKey, err := openTree(&tree, ids, cipher)
	if err != nil {
		return nil, err
	}
	if !changed && tree.Metadata.EncryptedRegex != legacyEncryptedRegex {
		return existingEnc, nil
	}
	decrypted, err := emitPlain(tree.Branches)
	if err != nil {
		return nil, err
	}
	plain, err := parsePlain(decrypted)
	if err != nil {
		return nil, err
	}
	o := collect(opts)
	WithKeyProof(ids)(&o)
	if changed { // a file someone wrote with other rules keeps them, as at a change
		out, _, err := freshUnderRules(plain, r, tree.Metadata, o)
		return out, err
	}
	if !provenKey(tree.Branches[0], ids, dataKey, fileRecipients(tree.Metadata)) {
		o.proofKey = nil // its own values under its own key, but never a proof of a key the operator did not choose
	}
	return resealUnderSameKey(tree.Metadata, plain, dataKey, cipher, o) // a legacy file
}

// Reencrypt encrypts plainDoc under a new data key for r as the next version of
// existingEnc, without opening it: the file's own rules are kept when they may be, as at a
// change (freshUnderRules). The writer re-wraps a file for new recipients this way when no
// identity it holds opens the file, from the cluster's plaintext of the object. A file that
// is not a sops file gets the operator's rule. ids, when given, are what the writer proves
// its data key with, as in Update.
func Reencrypt(existingEnc, plainDoc []byte, r Recipients, ids *Identities, opts ...Option) ([]byte, error) {
	plain, recipients, err := readRequest(plainDoc, r)
	if err != nil {
		return nil, err
	}
	o := collect(opts)
	if ids != nil {
		WithKeyProof(*ids)(&o)
	}
	tree, err := loadEncrypted(existingEnc)
	if err != nil {
		return encryptNew(plain, recipients, o)
	}
	out, _, err := freshUnderRules(plain, recipients, tree.Metadata, o)
	return out, err
}

// NeedsUpdateKeys says whether an encrypted file is wrapped for anything
// other than exactly r, so the writer can find the files a recipient change
// affects and re-wrap them in one commit: with Renew when it holds an
// identity, otherwise by encrypting the cluster's plaintext afresh with
// Encrypt.
func NeedsUpdateKeys(existingEnc []byte, r Recipients) (bool, error) {
	recipients, err := ParseRecipients(r)
	if err != nil {
		return false, err
	}
	tree, err := loadEncrypted(existingEnc)
	if err != nil {
		return false, err
	}
	return !onlyRecipients(tree.Metadata, recipients), nil
}

// DigestShowsDocument says, by its digest comment, whether an encrypted file no held
// identity opens holds plainDoc (compared as Update compares): the re-wrap encrypts such a
// file afresh from the cluster only when that changes nothing but who can open it.
// ErrNoDigestKey without a digest key; ErrNoDigest when the file carries no digest. A digest
// made under another digest key reads as another document.
func DigestShowsDocument(existingEnc []byte, plainDoc []byte, opts ...Option) (bool, error) {
	o := collect(opts)
	if o.digestKey == nil {
		return false, ErrNoDigestKey
	}
	plain, tree, err := loadBoth(existingEnc, plainDoc)
	if err != nil {
		return false, err
	}
	if len(tree.Branches) != 1 {
		return false, ErrNoDigest
	}
	d, ok := findDigest(tree.Branches[0])
	if !ok {
		return false, ErrNoDigest
	}
	return d.matches(o.digestKey, plain.canonical), nil
}

// loadBoth parses a plaintext document and an encrypted file, to compare them.
func loadBoth(existingEnc []byte, doc []byte) (plainDoc, sops.Tree, error) {
	plain, err := parsePlain(doc)
	if err != nil {
		return plainDoc{}, sops.Tree{}, err
	}
	tree, err := loadEncrypted(existingEnc)
	if err != nil {
		return plainDoc{}, sops.Tree{}, err
	}
	return plain, tree, nil
}

// HoldsDocument says whether one of the documents of an encrypted file, opened with ids,
// equals plainDoc (compared as Update compares): for a file holding several objects, which
// the writer does not rewrite, it tells an object in step with Git from a changed one.
func HoldsDocument(existingEnc []byte, plainDoc []byte, ids Identities) (bool, error) {
	plain, tree, err := loadBoth(existingEnc, plainDoc)
	if err != nil {
		return false, err
	}
	if _, err := openTree(&tree, ids, sopsaes.NewCipher()); err != nil {
		return false, err
	}
	for _, branch := range tree.Branches {
		if same, err := samePlaintext(sops.TreeBranches{branch}, plain); err != nil || same {
			return same, err
		}
	}
	return false, nil
}
