package batch

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
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
	// KeySecrets are the Secrets holding this target's identities and digest key. They are
	// never written, not even encrypted: key material stays out of Git.
	KeySecrets []types.NamespacedName
}

// KeyMaterialLabel marks Secrets holding an age identity or digest key that the operator
// created; no target writes them, whichever rule routes them.
const KeyMaterialLabel = "reverser.gitops.dev/key-material"

// isKeyMaterial says whether obj is a Secret no target writes: one holding keys, named by
// the target's encryption, or HoldsKeyMaterial, or a GitProvider's credentials
// (Options.Credentials).
func (w *worker) isKeyMaterial(t *target, k ObjectKey, obj *unstructured.Unstructured) (bool, error) {
	if k.GVR.Group != "" || k.GVR.Resource != "secrets" {
		return false, nil
	}
	name := types.NamespacedName{Namespace: k.Namespace, Name: k.Name}
	enc := t.spec.Encryption
	if (enc != nil && slices.Contains(enc.KeySecrets, name)) || HoldsKeyMaterial(obj) {
		return true, nil
	}
	if w.opts.Credentials == nil {
		return false, nil
	}
	credentials, err := w.opts.Credentials(name)
	if err != nil {
		return false, fmt.Errorf("telling whether Secret %s is a GitProvider's credentials: %w", name, err)
	}
	return credentials, nil
}

// HoldsKeyMaterial says whether a core Secret is one no target writes, whichever rule
// routes it: labelled KeyMaterialLabel, or holding an age private key in a value (another
// target's identities, Flux's sops-age Secret). The webhook asks it too, so admission does
// not judge a Secret the writer skips.
func HoldsKeyMaterial(obj *unstructured.Unstructured) bool {
	if _, ok := obj.GetLabels()[KeyMaterialLabel]; ok {
		return true
	}
	return holdsIdentity(obj)
}

// holdsIdentity says whether any value of a Secret's data (base64, as the API server returns
// it) or stringData holds an age private key. A value that is not base64 is looked at as it is.
func holdsIdentity(obj *unstructured.Unstructured) bool {
	data, _ := obj.Object["data"].(map[string]any)
	for _, v := range data {
		s, _ := v.(string)
		if raw, err := base64.StdEncoding.DecodeString(s); err == nil && encrypt.HoldsIdentity(raw) {
			return true
		}
		if encrypt.HoldsIdentity([]byte(s)) {
			return true
		}
	}
	stringData, _ := obj.Object["stringData"].(map[string]any)
	for _, v := range stringData {
		if s, _ := v.(string); encrypt.HoldsIdentity([]byte(s)) {
			return true
		}
	}
	return false
}

// GitProviders are the operator's own GitProvider resources, which a rule may route to a
// target like any other (a rule for every resource, or one naming them).
var GitProviders = schema.GroupResource{Group: "reverser.gitops.dev", Resource: "gitproviders"}

// URLCredentialsProblem says why obj, a GitProvider whose spec.url carries credentials
// (repo.HasCredentials), cannot be written in plaintext, and what to do; "" for any other
// object. The webhook denies with it what the writer refuses.
func URLCredentialsProblem(gr schema.GroupResource, obj *unstructured.Unstructured) string {
	if gr != GitProviders || obj == nil {
		return ""
	}
	url, _, _ := unstructured.NestedString(obj.Object, "spec", "url")
	if !repo.HasCredentials(url) {
		return ""
	}
	// Not "make GitProviders sensitive": sops would leave their spec, the URL included,
	// readable, which the writer refuses too (ReadableFields).
	return "its spec.url carries credentials (user info or a query), which never go to Git: " +
		"move them to the Secret of spec.secretRef (in a new GitProvider: spec.url is immutable)"
}

// options turns the digest key and the identities into encrypt options: files written
// carry a digest (no identity to compare plaintexts with), and a proof of their data key
// (an identity, so the key is reused for the next value).
func (e *Encryption) options() []encrypt.Option {
	var out []encrypt.Option
	if e.DigestKey != nil {
		out = append(out, encrypt.WithDigestKey(e.DigestKey))
	}
	if e.Identities.Len() > 0 {
		out = append(out, encrypt.WithKeyProof(e.Identities))
	}
	return out
}

// isSensitive says whether objects of gr must be encrypted before reaching t's folder: the
// operator-wide rule (core Secrets and --sensitive-resources) or the target's own list.
func (w *worker) isSensitive(t *target, gr schema.GroupResource) bool {
	return w.opts.Sensitive(gr) || slices.Contains(t.spec.Sensitive, gr)
}

// sensitivePlacement is where an encrypted document goes and what it replaces.
type sensitivePlacement struct {
	path     string
	existing []byte
	// plainFile holds the object's document in plaintext; it is removed from there.
	plainFile string
}

// neverWritten reports whether obj is a sensitive object holding key material or Git
// credentials, which the writer skips whatever its folder holds. Callers hold w.mu.
func (w *worker) neverWritten(t *target, k ObjectKey, obj *unstructured.Unstructured) (bool, error) {
	if !w.isSensitive(t, k.GVR.GroupResource()) {
		return false, nil
	}
	return w.isKeyMaterial(t, k, obj)
}

// planSensitive plans an object that must be encrypted: with encrypt.Update against the
// existing file, so an unchanged object produces no edit. Key material is skipped. Any failure refuses this object
// only (it stays listed in status); there is no plaintext fallback. Callers hold w.mu.
func (w *worker) planSensitive(t *target, p *writePlan, read func(string) ([]byte, error), k ObjectKey, obj *unstructured.Unstructured, file string, exists bool) error {
	if done, err := w.sensitiveHeld(t, p, read, k, obj, file, exists); done || err != nil {
		return err
	}
	return w.planEncrypted(t, p, read, k, obj, file, exists)
}

// sensitiveHeld reports whether a sensitive object is not encrypted into Git (done): key
// material, skipped; no encryption, fields sops would leave readable, or a file it shares
// with other objects, refused (p.refuse), unless that shared file already holds it as it
// is. Callers hold w.mu.
func (w *worker) sensitiveHeld(t *target, p *writePlan, read func(string) ([]byte, error), k ObjectKey, obj *unstructured.Unstructured, file string, exists bool) (done bool, err error) {
	id := k.Identity()
	if skip, err := w.isKeyMaterial(t, k, obj); err != nil || skip {
		if skip && exists { // written by an earlier release, or by a person
			p.refuse(k, fmt.Sprintf("%s: not written: it holds key material or Git credentials, which never go to Git; "+
				"%s was written before and is left as it is: remove it from Git", id, file))
		}
		return true, err
	}
	enc := t.spec.Encryption
	if enc == nil {
		p.refuse(k, fmt.Sprintf("%s: not written: %s", id, cannotEncrypt(t.spec.Key)))
		return true, nil
	}
	if extra := ReadableFields(obj); len(extra) > 0 {
		encryptedFile := ""
		if !w.isSensitive(t, k.GVR.GroupResource()) {
			encryptedFile = file // planned here only because that file is encrypted in Git
		}
		p.refuse(k, fmt.Sprintf("%s: not written: %s", id, ReadableProblem(k.GVR.GroupResource(), extra, encryptedFile)))
		return true, nil
	}
	if n := sharedEncryptedFile(t.index.Load(), file); exists && n > 0 {
		if inStep, err := w.inSharedFile(t, enc, read, file, obj); err != nil || inStep {
			return true, err // nothing to write: no refusal at every list
		}
		p.refuse(k, fmt.Sprintf("%s: not written: %s", id, sharedProblem(file, n)))
		return true, nil
	}
	return false, nil
}

// planEncrypted plans the encrypted write of a sensitive object sensitiveHeld let through:
// into its file with encrypt.Update, re-wrapped when only the recipients changed, moving
// its document out of a plaintext file that held it. Callers hold w.mu.
func (w *worker) planEncrypted(t *target, p *writePlan, read func(string) ([]byte, error), k ObjectKey, obj *unstructured.Unstructured, file string, exists bool) error {
	id, enc := k.Identity(), t.spec.Encryption
	at, problem, err := w.placeSensitive(t, read, k, file, exists)
	if err != nil || problem != "" {
		if problem != "" {
			p.refuse(k, fmt.Sprintf("%s: %s", id, problem))
		}
		return err
	}
	out, changed, problem := encryptObject(t, enc, at.existing, obj)
	if problem != "" {
		p.refuse(k, fmt.Sprintf("%s: not written to %s: %s", id, at.path, problem))
		return nil
	}
	if !changed {
		if renewed := rewrapped(t, enc, at.existing, obj); renewed != nil {
			out, changed = renewed, true
		}
	}
	if !changed && at.plainFile == "" {
		return nil
	}
	if err := movePlaintext(p, read, id, at.plainFile); errors.Is(err, errUnwritable) {
		p.refuse(k, fmt.Sprintf("%s: not written: its plaintext document could not be removed: %v", id, err))
		return nil
	} else if err != nil {
		return err
	}
	p.files[at.path] = out
	verb := "Update"
	if !exists {
		verb = "Create"
	}
	p.actions = append(p.actions, action{verb, id, at.path})
	p.located[id] = at.path
	return nil
}

// clearFields are the top-level fields of a sensitive object that may stay readable: the
// object's identity and a Secret's type and immutability, never a value.
func clearFields() []string {
	return []string{"apiVersion", "kind", "metadata", "type", "immutable", "data", "stringData"}
}

// ReadableProblem says why an object is not written when sops would leave its fields
// readable: the writer and admission give the same reason. encryptedFile is the object's
// file when it is written encrypted only because that file is encrypted in Git (its
// resource is not sensitive), "" otherwise.
func ReadableProblem(gr schema.GroupResource, fields []string, encryptedFile string) string {
	msg := fmt.Sprintf("only data, stringData and annotation values are encrypted, and it also has %v, which would be readable in Git; ", fields)
	if encryptedFile != "" {
		return msg + fmt.Sprintf("%s is encrypted in Git, so the writer keeps it encrypted: decrypt that file in Git, or stop routing %s to this target", encryptedFile, gr)
	}
	return msg + fmt.Sprintf("stop routing %s to this target", gr)
}

// ReadableFields lists, sorted, the top-level fields of a sensitive object that sops would
// leave in the clear (of the top-level fields only data and stringData are encrypted), e.g. a custom sensitive
// resource keeping its values under spec. Such an object is refused rather than written
// half-encrypted. Pure.
func ReadableFields(obj *unstructured.Unstructured) []string {
	var out []string
	allowed := clearFields()
	for field := range obj.Object {
		if field != "status" && !slices.Contains(allowed, field) {
			out = append(out, field)
		}
	}
	slices.Sort(out)
	return out
}

// placeSensitive finds the encrypted file of an object: the file already holding it when
// that is a sops file, otherwise the canonical .sops.yaml path. problem says why the object
// cannot be placed (a foreign file at that path).
func (w *worker) placeSensitive(t *target, read func(string) ([]byte, error), k ObjectKey, file string, exists bool) (sensitivePlacement, string, error) {
	if exists {
		content, err := read(file)
		if unwritablePath(err) {
			return sensitivePlacement{}, fmt.Sprintf("not written: %v", err), nil
		}
		if err != nil {
			return sensitivePlacement{}, "", fmt.Errorf("reading %s: %w", file, err)
		}
		if encrypt.IsEncrypted(content) {
			return sensitivePlacement{path: file, existing: content}, "", nil
		}
	}
	path, err := plan.CanonicalPath(t.spec.Folder, k.GVR, k.Namespace, k.Name, true)
	if err != nil {
		return sensitivePlacement{}, err.Error(), nil
	}
	content, err := read(path)
	if unwritablePath(err) {
		return sensitivePlacement{}, fmt.Sprintf("not written: %v", err), nil
	}
	if err != nil {
		return sensitivePlacement{}, "", fmt.Errorf("reading %s: %w", path, err)
	}
	if len(content) > 0 {
		return sensitivePlacement{}, "not written: " + takenProblem(path), nil
	}
	at := sensitivePlacement{path: path}
	if exists {
		at.plainFile = file
	}
	return at, "", nil
}

// sharedEncryptedFile says how many objects file holds when it is an encrypted file of more
// than one (a person's multi-document `sops -e`), 0 otherwise. The writer keeps one object
// per encrypted file: rewriting one would drop the others, removing one would break the
// file's MAC.
func sharedEncryptedFile(ix *folderIndex, file string) int {
	if ix == nil || !ix.isEncrypted(file) {
		return 0
	}
	if n := len(ix.holders(file)); n > 1 {
		return n
	}
	return 0
}

// inSharedFile says whether an encrypted file of several objects holds obj as the cluster
// has it, so nothing is to be written; false when the target holds no identity to tell.
func (w *worker) inSharedFile(t *target, enc *Encryption, read func(string) ([]byte, error), file string, obj *unstructured.Unstructured) (bool, error) {
	if enc.Identities.Len() == 0 {
		return false, nil
	}
	content, err := read(file)
	if unwritablePath(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", file, err)
	}
	plain, _, err := manifest.UpsertStyled(nil, sanitize.Object(obj), t.style)
	if err != nil {
		return false, nil
	}
	same, err := encrypt.HoldsDocument(content, plain, enc.Identities)
	return err == nil && same, nil
}

// sharedProblem says why an object of an encrypted file holding n objects is neither
// written nor removed; admission (Locate) and the writer give the same reason. Pure.
func sharedProblem(file string, n int) string {
	return fmt.Sprintf("%s holds %d objects, some or all of them encrypted, and the writer keeps one object per "+
		"encrypted file (rewriting it would drop the others or break the file's MAC): split it in Git into one "+
		".sops.yaml file per object", file, n)
}

// cannotEncrypt says why a sensitive object, or one encrypted in Git, is not written to a
// target without encryption; admission (Locate) and the writer give the same reason. Pure.
func cannotEncrypt(target types.NamespacedName) string {
	return fmt.Sprintf("sensitive objects are never stored in plaintext and GitTarget %s cannot encrypt "+
		"(set spec.encryption.age; see its EncryptionReady condition)", target)
}

// takenProblem says why a sensitive object is not written to its canonical .sops.yaml path,
// which holds a file that is not its encrypted document (comments only, or another object):
// an encrypted file is one object and nothing else, and writing it would drop what the file
// holds. Admission (Locate) and the writer give the same reason. Pure.
func takenProblem(path string) string {
	return fmt.Sprintf("%s already exists and is not this object's encrypted file; move or rename it in Git (an encrypted file holds one object and nothing else, and replaces all the file held)", path)
}

// encryptObject renders the sanitized object as a new document and encrypts it against the
// existing file. problem is a message safe for status: encrypt's errors never quote values
// or keys.
func encryptObject(t *target, enc *Encryption, existing []byte, obj *unstructured.Unstructured) (out []byte, changed bool, problem string) {
	plain, _, err := manifest.UpsertStyled(nil, sanitize.Object(obj), t.style)
	if err != nil {
		return nil, false, fmt.Sprintf("cannot be rendered: %v", err)
	}
	out, changed, err = encrypt.Update(existing, plain, enc.Recipients, &enc.Identities, enc.options()...)
	if err != nil {
		return nil, false, fmt.Sprintf("cannot be encrypted, so it is not written at all: %v%s", err, encryptionHint(err))
	}
	return out, changed, ""
}

// encryptionHint says what fixes an encryption failure of an object whose file Git may
// already hold, or "" when its reason says it already. Pure.
func encryptionHint(err error) string {
	const again = " the file in Git so it is encrypted again from the cluster"
	switch {
	case errors.Is(err, encrypt.ErrNoDigestKey):
		return "; put an identity the file is encrypted for in the Secret of spec.encryption.age.secretRef, or delete" + again
	case errors.Is(err, encrypt.ErrIdentityMismatch):
		return "; add an identity of one of the file's recipients to the Secret of spec.encryption.age.secretRef, or delete" + again
	case errors.Is(err, encrypt.ErrIntegrity), errors.Is(err, encrypt.ErrMalformedDocument), errors.Is(err, encrypt.ErrNotEncrypted):
		return "; the file was changed by hand or damaged: restore it from Git's history, or delete" + again
	case errors.Is(err, encrypt.ErrNoRecipients):
		return "; set spec.encryption.age.recipients or secretRef"
	}
	return ""
}

// rewrapped is existing, an object's encrypted file, wrapped for the target's recipients
// when they changed since it was written, which encrypt.Update leaves to the re-wrap
// (syncKeys) and the re-wrap leaves to a window holding the object (reencryptFromCluster):
// encrypt.Renew with an identity, else obj encrypted afresh (encrypt.Reencrypt, keeping
// the file's rules as a change would). nil when nothing is needed or neither way works (the
// next re-wrap or change tries again).
func rewrapped(t *target, enc *Encryption, existing []byte, obj *unstructured.Unstructured) []byte {
	if needs, err := encrypt.NeedsUpdateKeys(existing, enc.Recipients); err != nil || !needs {
		return nil
	}
	if enc.Identities.Len() > 0 {
		if out, err := encrypt.Renew(existing, enc.Identities, enc.Recipients, enc.options()...); err == nil {
			return out
		}
	}
	plain, _, err := manifest.UpsertStyled(nil, sanitize.Object(obj), t.style)
	if err != nil {
		return nil
	}
	out, err := encrypt.Reencrypt(existing, plain, enc.Recipients, &enc.Identities, enc.options()...)
	if err != nil {
		return nil
	}
	return out
}

// movePlaintext removes an object's plaintext document from the file that held it (found in
// Git, e.g. written by a person), now that it gets an encrypted file of its own.
func movePlaintext(p *writePlan, read func(string) ([]byte, error), id manifest.Identity, file string) error {
	if file == "" {
		return nil
	}
	return removeFrom(p, read, id, file)
}
