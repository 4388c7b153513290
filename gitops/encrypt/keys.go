package encrypt

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"filippo.io/age"
	sopsage "github.com/getsops/sops/v3/age"
)

// IdentitySuffix is the Secret data key suffix that marks an age identity,
// the convention Flux's kustomize-controller uses, so one Secret can serve
// both Flux (decrypting) and the operator (comparing without churn).
const IdentitySuffix = ".agekey"

// privateKeyPrefix starts every age X25519 private key; it is used only to
// recognise a private key pasted where a public key belongs.
const privateKeyPrefix = "AGE-SECRET-KEY-"

// Recipients are age X25519 public keys ("age1..."), the only thing the
// operator needs to encrypt. They are public: they may be logged and are
// written to .sops.yaml and to every encrypted file.
type Recipients []string

// ParseRecipients validates public keys and returns them trimmed, sorted and
// deduplicated, so that equal sets compare equal and generated files are
// deterministic. A malformed entry yields ErrMalformedKey naming its index
// only: a private key pasted by mistake must not end up in a condition or an
// Event.
func ParseRecipients(keys []string) (Recipients, error) {
	if len(keys) == 0 {
		return nil, ErrNoRecipients
	}
	out := make(Recipients, 0, len(keys))
	for i, key := range keys {
		key = strings.TrimSpace(key)
		if err := checkRecipient(key); err != nil {
			return nil, fmt.Errorf("%w: recipient %d %s", ErrMalformedKey, i, err.Error())
		}
		out = append(out, key)
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

// recipientProblem is a fixed description of what is wrong with a recipient,
// never containing the recipient itself.
type recipientProblem string

// Error returns the fixed description.
func (p recipientProblem) Error() string { return string(p) }

// checkRecipient says what is wrong with one public key, without quoting it.
func checkRecipient(key string) error {
	switch {
	case key == "":
		return recipientProblem("is empty")
	case strings.HasPrefix(strings.ToUpper(key), privateKeyPrefix):
		return recipientProblem("is an age private key, not a public key: give its public key (age1...)")
	}
	if _, err := age.ParseX25519Recipient(key); err != nil {
		// age's message quotes the input; drop it.
		return recipientProblem("is not an age X25519 public key (age1...)")
	}
	return nil
}

// masterKeys turns validated recipients into sops age master keys.
func (r Recipients) masterKeys() ([]*sopsage.MasterKey, error) {
	keys := make([]*sopsage.MasterKey, 0, len(r))
	for i, recipient := range r {
		key, err := sopsage.MasterKeyFromRecipient(recipient)
		if err != nil {
			return nil, fmt.Errorf("%w: recipient %d is not an age public key", ErrMalformedKey, i)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Identities are age X25519 private keys read from a Secret. They let the
// operator open existing files to compare plaintext and reuse data keys.
// They print as a count only, so a stray %v or %+v in a log line cannot leak
// them; the zero value holds no identity.
type Identities struct {
	ids        []*age.X25519Identity
	recipients Recipients
}

// ParseIdentities reads every data key ending in IdentitySuffix, each
// holding one or more age private keys in age-keygen's format (one per line,
// "#" comments and blank lines ignored). Keys are read in sorted order so
// the result does not depend on map iteration. It returns ErrNoIdentity when
// no identity is found and ErrMalformedKey naming the data key and line of a
// bad entry, never its content.
func ParseIdentities(data map[string][]byte) (Identities, error) {
	names := identityKeys(data)
	var out Identities
	for _, name := range names {
		ids, err := parseIdentityFile(name, data[name])
		if err != nil {
			return Identities{}, err
		}
		out.ids = append(out.ids, ids...)
	}
	if len(out.ids) == 0 {
		return Identities{}, fmt.Errorf("%w: no data key ending in %q holds an age private key", ErrNoIdentity, IdentitySuffix)
	}
	out.recipients = derivedRecipients(out.ids)
	return out, nil
}

// identityPrefix starts every age private key: X25519 ("AGE-SECRET-KEY-1…") and
// post-quantum ("AGE-SECRET-KEY-PQ-1…"). Bech32 is one case throughout; age-keygen writes
// upper case.
const identityPrefix = "AGE-SECRET-KEY-"

// bech32Chars are the characters of a bech32 data part, upper case.
const bech32Chars = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"

// identityChars is the length of a 32-byte key and its checksum in bech32.
const identityChars = 58

// HoldsIdentity says whether value contains an age private key, in either case: the prefix,
// not glued to a preceding letter or digit, then a key's worth of bech32 characters. The
// writer keeps Secrets holding one out of Git, even encrypted, whoever's key it is: another
// target's identity, Flux's sops-age Secret. Keys hidden in compressed or doubly encoded
// values are not seen; label such Secrets reverser.gitops.dev/key-material.
func HoldsIdentity(value []byte) bool {
	upper := bytes.ToUpper(value)
	for from := 0; from < len(upper); {
		i := bytes.Index(upper[from:], []byte(identityPrefix))
		if i < 0 {
			return false
		}
		if identityAt(upper, from+i) {
			return true
		}
		from += i + 1
	}
	return false
}

// identityAt says whether an age private key starts at upper[at], where identityPrefix is.
func identityAt(upper []byte, at int) bool {
	if at > 0 && isAlphanumeric(upper[at-1]) {
		return false
	}
	rest := bytes.TrimPrefix(upper[at+len(identityPrefix):], []byte("PQ-"))
	if len(rest) == 0 || rest[0] != '1' {
		return false
	}
	n := 0
	for _, c := range rest[1:] {
		if !strings.ContainsRune(bech32Chars, rune(c)) {
			break
		}
		n++
	}
	return n >= identityChars
}

// isAlphanumeric reports whether c is an ASCII letter or digit (upper case input).
func isAlphanumeric(c byte) bool {
	return ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z')
}

// identityKeys lists the data keys holding identities, sorted.
func identityKeys(data map[string][]byte) []string {
	var names []string
	for name := range data {
		if strings.HasSuffix(name, IdentitySuffix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// parseIdentityFile parses one data key's value line by line, so an error
// can name the line without quoting it (age's own parser may echo parts of
// the key).
func parseIdentityFile(name string, value []byte) ([]*age.X25519Identity, error) {
	var ids []*age.X25519Identity
	scanner := bufio.NewScanner(strings.NewReader(string(value)))
	for n := 1; scanner.Scan(); n++ {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := age.ParseX25519Identity(line)
		if err != nil {
			return nil, fmt.Errorf("%w: data key %q line %d is not an age X25519 private key", ErrMalformedKey, name, n)
		}
		ids = append(ids, id)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("%w: data key %q cannot be read as lines", ErrMalformedKey, name)
	}
	return ids, nil
}

// derivedRecipients returns the sorted, deduplicated public keys of ids.
func derivedRecipients(ids []*age.X25519Identity) Recipients {
	out := make(Recipients, 0, len(ids))
	for _, id := range ids {
		out = append(out, id.Recipient().String())
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Recipients returns the public keys of the identities, so a GitTarget that
// only references a Secret of identities can still encrypt, and files stay
// readable by the operator itself.
func (ids Identities) Recipients() Recipients {
	return slices.Clone(ids.recipients)
}

// Len says how many identities are held; zero means none.
func (ids Identities) Len() int { return len(ids.ids) }

// String prints the number of identities only, never the keys.
func (ids Identities) String() string {
	return fmt.Sprintf("Identities(%d, redacted)", len(ids.ids))
}

// Format makes every fmt verb print String, so no verb can dump the keys.
func (ids Identities) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, ids.String())
}

// parsed converts the identities for sops' age key source.
func (ids Identities) parsed() sopsage.ParsedIdentities {
	out := make(sopsage.ParsedIdentities, 0, len(ids.ids))
	for _, id := range ids.ids {
		out = append(out, id)
	}
	return out
}

// GenerateIdentity creates a new age X25519 identity for generateWhenMissing.
// The private key goes into the referenced Secret (under a data key ending
// in IdentitySuffix) and nowhere else; the public key is safe to annotate,
// log and commit.
func GenerateIdentity() (privateKey string, publicKey string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", "", fmt.Errorf("generating age identity: %w", err)
	}
	return id.String(), id.Recipient().String(), nil
}
