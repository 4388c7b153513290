package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/sanitize"
)

// secretsGVR is the resource of core Secrets, the one sensitive kind whose resource name
// the writer knows from a document alone (needed to re-encrypt from the cluster).
var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// rekeyPlan is the commit that brings a folder's encryption in step with its recipients.
type rekeyPlan struct {
	files map[string][]byte
	// rewrapped counts encrypted files whose data key was re-wrapped or re-encrypted.
	rewrapped int
	// ruled counts encrypted files moved from the earlier rule (annotation values in the
	// clear) to encrypt.EncryptedRegex.
	ruled int
	// skipped lists files left for their object's next change.
	skipped []string
	// keyMaterial lists files holding a Secret that is key material in the cluster: left as
	// they are, never renewed from the cluster.
	keyMaterial []string
	// created says the folder had no .sops.yaml.
	created bool
}

// syncKeys makes the target folder's .sops.yaml match its recipients and, when it did not,
// re-wraps every encrypted file in the folder for them — in one commit whose message says
// so. It runs when the controller registers the target, so a recipient change is applied
// without waiting for a change of a sensitive object. A push race is left to the next
// registration (every poll interval).
func (w *worker) syncKeys(ctx context.Context, key types.NamespacedName) (TargetStatus, error) {
	w.mu.Lock()
	var ready []types.NamespacedName
	defer func() { w.reportReady(ready) }() // runs after the unlock below
	defer func() { ready = w.takeReady(); w.mu.Unlock() }()
	t, ok := w.targets[key]
	if !ok {
		return TargetStatus{}, nil
	}
	enc := t.spec.Encryption
	if enc == nil {
		t.rekeyFailed = "" // nothing left to re-wrap for
	}
	if enc == nil || !t.st.Known || !t.verdict.Supported || time.Now().Before(t.rekeyRetryAt) {
		return w.view(t), nil
	}
	rp, err := w.planRekey(t, enc)
	if rp == nil && err == nil {
		t.rekeyFailed, t.rekeyBackoff = "", 0 // in step (landed, or made so by hand), or the folder is refused now
	}
	if err != nil || rp == nil {
		return w.view(t), err
	}
	err = w.pushRekey(ctx, t, enc, rp)
	return w.view(t), err
}

// planRekey returns nil when the folder's .sops.yaml already matches the recipients.
// Callers hold w.mu.
func (w *worker) planRekey(t *target, enc *Encryption) (*rekeyPlan, error) {
	cfgPath := path.Join(t.spec.Folder, encrypt.ConfigFileName)
	want, err := encrypt.SopsConfig(t.spec.Folder, enc.Recipients)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", cfgPath, err)
	}
	tree := w.repo.TreeReader(w.remoteTip)
	have, _, err := tree.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", cfgPath, err)
	}
	if bytes.Equal(have, want) {
		return nil, nil
	}
	if t.stale(w.remoteTip) {
		// An index a failed re-read left behind would miss files added or moved at the tip,
		// and this runs once per recipient change: those would stay wrapped as they were.
		if err := w.analyze(t); err != nil {
			return nil, err
		}
		if !t.verdict.Supported {
			return nil, nil // the folder is refused now: re-wrapped once it is fixed
		}
	}
	rp := &rekeyPlan{files: map[string][]byte{cfgPath: want}, created: len(have) == 0}
	for _, file := range t.index.Load().files() {
		content, _, err := tree.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if !bytes.Contains(content, []byte("sops")) {
			continue // cannot be a sops file: skip parsing it
		}
		if err := w.rewrapFile(t, enc, rp, file, content); err != nil {
			return nil, err
		}
	}
	return rp, nil
}

// rewrapFile renews one encrypted file for the recipients, and moves a file written under
// the earlier rule to the current one: with encrypt.Renew (a new data key for new
// recipients; a legacy file for the same ones keeps its ciphertext) when an identity opens
// it, otherwise by encrypting the cluster's current state afresh. A file neither way can
// renew is left for its object's next change.
func (w *worker) rewrapFile(t *target, enc *Encryption, rp *rekeyPlan, file string, content []byte) error {
	needs, err := encrypt.NeedsUpdateKeys(content, enc.Recipients)
	if err != nil {
		return nil // not a sops file the writer can judge
	}
	earlier := encrypt.UsesEarlierRule(content)
	if !needs && !earlier {
		return nil // already right
	}
	var out []byte
	if enc.Identities.Len() > 0 {
		if keyMaterial, err := w.fileOfKeyMaterial(t, enc, content); err != nil {
			return skipUnsynced(rp, file, err)
		} else if keyMaterial {
			rp.keyMaterial = append(rp.keyMaterial, file) // re-wrapped, new recipients could read it
			return nil
		}
		out, err = encrypt.Renew(content, enc.Identities, enc.Recipients, enc.options()...)
	}
	if out == nil || err != nil {
		var keyMaterial bool
		if out, keyMaterial, err = w.reencryptFromCluster(t, enc, content); err != nil {
			return skipUnsynced(rp, file, err)
		}
		if keyMaterial {
			rp.keyMaterial = append(rp.keyMaterial, file)
			return nil
		}
	}
	if out == nil {
		rp.skipped = append(rp.skipped, file)
		return nil
	}
	rp.files[file] = out
	if needs {
		rp.rewrapped++
	}
	if earlier {
		rp.ruled++
	}
	return nil
}

// skipUnsynced leaves file for a later listing, which renews it (rewrapped), when err is
// only that the cache of its object has not synced: what it holds cannot be told yet, and
// one such file neither holds back the re-wrap of the others nor reports the target
// Unreachable. Any other error is returned.
func skipUnsynced(rp *rekeyPlan, file string, err error) error {
	if errors.Is(err, ErrNotSynced) {
		rp.skipped = append(rp.skipped, file)
		return nil
	}
	return err
}

// fileOfKeyMaterial says whether an encrypted file holds a Secret that is key material, by
// what Git holds (its label or an age private key among its decrypted values, in any of its
// documents) or by its object in the cluster (isKeyMaterial): such a file, written by an
// earlier release or a person, is never re-wrapped for new recipients.
func (w *worker) fileOfKeyMaterial(t *target, enc *Encryption, content []byte) (bool, error) {
	docs, err := manifest.Parse(content)
	if err != nil {
		return false, nil
	}
	var secrets []manifest.Identity
	for _, d := range docs {
		if d.Identity.Group == "" && d.Identity.Kind == "Secret" {
			secrets = append(secrets, d.Identity)
		}
	}
	if len(secrets) == 0 {
		return false, nil
	}
	if plain, err := encrypt.Decrypt(content, enc.Identities); err == nil {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(plain), 4096)
		for {
			var held unstructured.Unstructured
			if err := dec.Decode(&held.Object); err != nil {
				break
			}
			if held.Object != nil && HoldsKeyMaterial(&held) {
				return true, nil
			}
		}
	}
	for _, id := range secrets {
		if keyMaterial, err := w.secretOfKeyMaterial(t, enc, id); err != nil || keyMaterial {
			return keyMaterial, err
		}
	}
	return false, nil
}

// secretOfKeyMaterial says whether Secret id is key material by its object in the cluster,
// or, when it is gone or not claimed, by the names the target knows.
func (w *worker) secretOfKeyMaterial(t *target, enc *Encryption, id manifest.Identity) (bool, error) {
	k := ObjectKey{GVR: secretsGVR, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}
	obj, err := w.opts.Resolver.Current(t.spec.Key, k)
	if errors.Is(err, ErrNotWatched) || errors.Is(err, ErrNotSelected) || (err == nil && obj == nil) {
		return slices.Contains(enc.KeySecrets, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}), nil
	}
	if err != nil {
		return false, err
	}
	return w.isKeyMaterial(t, k, obj)
}

// reencryptFromCluster encrypts the cluster's current state of the Secret a file holds;
// nil when the file holds something else or the object is no longer claimed, or when the
// cluster's state is a change Git does not hold yet: one waiting in a window, or one its
// digest shows (still on its way to a window, or one no rule writes, as an update under a
// rule without UPDATE). Its window commits it under its author (for the recipients then),
// not this commit under the committer. A file without a digest (a person's) cannot be
// told: it is encrypted from the cluster. A Secret that is key material is never read into
// Git: keyMaterial says so and out is nil.
func (w *worker) reencryptFromCluster(t *target, enc *Encryption, content []byte) (out []byte, keyMaterial bool, err error) {
	docs, err := manifest.Parse(content)
	if err != nil || len(docs) != 1 || docs[0].Identity.Group != "" || docs[0].Identity.Kind != "Secret" {
		return nil, false, nil
	}
	id := docs[0].Identity
	k := ObjectKey{GVR: secretsGVR, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}
	obj, err := w.opts.Resolver.Current(t.spec.Key, k)
	if errors.Is(err, ErrNotWatched) || errors.Is(err, ErrNotSelected) {
		return nil, false, nil // left for its object's next change
	}
	if err != nil || obj == nil {
		return nil, false, err
	}
	if skip, err := w.isKeyMaterial(t, k, obj); err != nil || skip {
		return nil, skip, err
	}
	w.qmu.Lock()
	pending := t.q.holds(k)
	w.qmu.Unlock()
	if pending {
		return nil, false, nil // its window's plan re-wraps it (rewrapped)
	}
	plain, _, err := manifest.UpsertStyled(nil, sanitize.Object(obj), t.style)
	if err != nil {
		return nil, false, nil
	}
	if held, err := encrypt.DigestShowsDocument(content, plain, enc.options()...); err == nil && !held {
		return nil, false, nil // left for its next change
	}
	out, err = encrypt.Reencrypt(content, plain, enc.Recipients, &enc.Identities, enc.options()...)
	if err != nil {
		return nil, false, nil
	}
	return out, false, nil
}

// rekeyMessage says what the commit did, listing the recipients (public keys).
func rekeyMessage(folder string, enc *Encryption, rp *rekeyPlan) string {
	var b strings.Builder
	verb := "Update"
	if rp.created {
		verb = "Create"
	}
	switch {
	case rp.rewrapped > 0:
		fmt.Fprintf(&b, "Re-wrap %d encrypted file(s) in %s for %d age recipient(s)\n\n", rp.rewrapped, folder, len(enc.Recipients))
		b.WriteString("The age recipients changed: each file is encrypted under a new data key for the\nnew set (the effect of `sops rotate`): a removed recipient may have kept the old\none, and an added one gets none of the keys written before it; .sops.yaml follows.\n\n")
	case rp.ruled > 0:
		fmt.Fprintf(&b, "Encrypt the annotation values of %d file(s) in %s\n\n", rp.ruled, folder)
	default:
		fmt.Fprintf(&b, "%s %s for %d age recipient(s)\n\n", verb, path.Join(folder, encrypt.ConfigFileName), len(enc.Recipients))
	}
	if rp.ruled > 0 {
		fmt.Fprintf(&b, "%d file(s) written before annotation values were encrypted now encrypt them too,\nas .sops.yaml says (the values of data, stringData and annotations).\n\n", rp.ruled)
	}
	b.WriteString("Recipients:\n")
	for _, r := range enc.Recipients {
		fmt.Fprintf(&b, "- %s\n", r)
	}
	if len(rp.keyMaterial) > 0 {
		b.WriteString("\nLeft as they are (they hold key material, which the operator never writes; remove them):\n")
		for _, f := range rp.keyMaterial {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	if len(rp.skipped) > 0 {
		fmt.Fprintf(&b, "\nNot re-wrapped (no identity opens them, or what they hold cannot be read yet; renewed at their next change or listing):\n")
		for _, f := range rp.skipped {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	return b.String()
}

// pushRekey commits the plan on the remote tip and pushes it with compare-and-swap. When
// someone else pushed first, the branch is re-read and the next registration plans again.
// Callers hold w.mu.
func (w *worker) pushRekey(ctx context.Context, t *target, enc *Encryption, rp *rekeyPlan) error {
	w.actFor(t.spec)
	sig := object.Signature{Name: t.spec.Committer.Name, Email: t.spec.Committer.Email, When: time.Now()}
	sha, err := w.repo.Commit(w.remoteTip, rp.files, sig, sig, rekeyMessage(t.spec.Folder, enc, rp))
	if errors.Is(err, repo.ErrNoChange) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("committing re-wrapped files: %w", err)
	}
	if err := w.push(ctx, sha); err != nil {
		if errors.Is(err, repo.ErrRemoteMoved) {
			w.opts.Metrics.push(w.key, "conflict")
			return w.refresh(ctx, false, t)
		}
		if errors.Is(err, repo.ErrMaybeMoved) { // declined, perhaps as a lost race: a fetch tells
			expected := w.remoteTip
			if ferr := w.refresh(ctx, false, t); ferr != nil || w.remoteTip != expected {
				w.opts.Metrics.push(w.key, "failed")
				if ferr != nil { // the re-wrap failed, and the registration with it
					w.opts.Metrics.failed(w.key)
				}
				return ferr // it moved: planned again on the new tip, as after a lost race
			}
			err = repo.Declined(err)
		}
		// A write failure, as a window's: status says WriteFailed (not that the remote is
		// unreachable), and a registration after the backoff tries again, rather than the
		// controller's quick retries of an error. No SHA in the error: the commit is made
		// again, with a new one, on every attempt, and status would change each time.
		w.opts.Metrics.push(w.key, "failed")
		w.opts.Metrics.failed(w.key)
		err = fmt.Errorf("pushing re-wrapped files: %w", err)
		t.rekeyFailed = err.Error()
		t.rekeyBackoff = min(max(2*t.rekeyBackoff, time.Second), 2*time.Minute)
		t.rekeyRetryAt = time.Now().Add(t.rekeyBackoff)
		w.log.Error(err, "re-wrapping the folder's encrypted files failed; tried again at a later registration",
			"gitTarget", t.spec.Key.String(), "retryIn", t.rekeyBackoff.String())
		return nil
	}
	w.opts.Metrics.push(w.key, "pushed")
	if err := w.pushed(t, sha, rp.files, nil); err != nil {
		return err
	}
	t.rekeyFailed, t.rekeyBackoff = "", 0
	t.st.LastCommit, t.st.LastCommitTime = sha, sig.When
	w.log.Info("re-wrapped encrypted files", "gitTarget", t.spec.Key.String(), "sha", sha.String(),
		"files", rp.rewrapped, "skipped", len(rp.skipped), "recipients", len(enc.Recipients))
	return nil
}

// files lists the folder's indexed files, sorted. An encrypted document can sit in any of
// them (a person may rename a .sops.yaml file; the writer keeps editing it where it is).
func (f *folderIndex) files() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.byFile))
	for file := range f.byFile {
		out = append(out, file)
	}
	sort.Strings(out)
	return out
}
