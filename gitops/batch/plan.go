package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// action is what a commit did to one object, for the commit message.
type action struct {
	verb string // Create, Update, Delete
	id   manifest.Identity
	path string
}

// writePlan is the set of file contents one commit will hold (nil content deletes a file).
type writePlan struct {
	files   map[string][]byte
	actions []action
	// refused says why each object of the window it could not write was left out.
	refused map[ObjectKey]string
	// located overrides the target's index for identities this plan added ("" = removed),
	// so a failed push leaves the index describing the remote tip.
	located map[manifest.Identity]string
	// parsed holds the documents the YAML editor read back while verifying its last edit of
	// a file, so the index takes them after the push instead of parsing the file again.
	parsed map[string]parsedFile
	// deferred are the objects whose cache is not complete (ErrNotSynced), with their
	// intent, and why: they stay dirty for a later commit.
	deferred    map[ObjectKey]intent
	deferredErr error
	// waits are the identities of the deferred objects: a removal of one at another
	// version waits with it (planBefore plans it after).
	waits map[manifest.Identity]bool
	// heldBack are new objects whose file another object's document holds, planned again
	// once every other key is (lastPass): a removal later in the window may empty the file.
	heldBack []ObjectKey
	lastPass bool
	// resolved are the keys read before planning (resolveVersions).
	resolved map[ObjectKey]resolution
	// present are the objects the plan found in the cluster: no orphans, whatever an
	// earlier list said (target.forgetOrphans), and not removed by a key of the same
	// object at another version in the window (planBefore).
	present map[manifest.Identity]bool
	// ahead are the new objects rendered on every core before planning (renderNew).
	ahead map[ObjectKey]rendered
}

// parsedFile is a file's content with its documents as manifest.Parse returns them.
type parsedFile struct {
	content []byte
	docs    []manifest.DocInfo
}

// docsOf returns the documents of content at path when the plan read them back already.
func docsOf(parsed map[string]parsedFile, path string, content []byte) ([]manifest.DocInfo, bool) {
	pf, ok := parsed[path]
	if !ok || !bytes.Equal(pf.content, content) {
		return nil, false
	}
	return pf.docs, true
}

// deferKey keeps k dirty for a later commit, with its intent, because of why (nil keeps
// the reason given before).
func (p *writePlan) deferKey(k ObjectKey, in intent, why error) {
	if p.deferred == nil {
		p.deferred, p.waits = map[ObjectKey]intent{}, map[manifest.Identity]bool{}
	}
	p.deferred[k], p.waits[k.Identity()] = in, true
	if why != nil {
		p.deferredErr = why
	}
}

// refuse leaves k out of the commit, for reason (which names the object).
func (p *writePlan) refuse(k ObjectKey, reason string) {
	if p.refused == nil {
		p.refused = map[ObjectKey]string{}
	}
	p.refused[k] = reason
}

// refusals are the plan's reasons, sorted.
func (p *writePlan) refusals() []string {
	out := make([]string, 0, len(p.refused))
	for _, r := range p.refused {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func (p *writePlan) lookup(ix *folderIndex, id manifest.Identity) (string, bool) {
	if f, ok := p.located[id]; ok {
		return f, f != ""
	}
	loc, ok := ix.lookup(id)
	return loc.File, ok
}

// message is the commit message: the CommitRequests' messages when the window commits for
// any, else the target's templates rendered for the window's author; fellBack says why the
// default message was used instead of the target's template (Messages.RenderOrDefault).
func (p *writePlan) message(t *target, win *authorWindow) (msg string, fellBack error) {
	if len(win.requests) > 0 {
		msgs := make([]string, 0, len(win.requests))
		for _, r := range win.requests {
			msgs = append(msgs, strings.TrimSpace(r.Message))
		}
		return strings.Join(msgs, "\n\n") + "\n", nil
	}
	changes := make([]MessageChange, 0, len(p.actions))
	for _, a := range p.actions {
		changes = append(changes, MessageChange{Verb: a.verb, Group: a.id.Group, Kind: a.id.Kind, Namespace: a.id.Namespace,
			Name: a.id.Name, Object: a.id.String(), Path: a.path})
	}
	author := win.author
	if author == "" {
		author = t.spec.Committer.Name
	}
	return t.spec.Messages.RenderOrDefault(t.spec.Key.String(), author, changes)
}

// plan resolves every dirty key to its current state and edits the files holding them.
// Callers hold w.mu.
func (w *worker) plan(ctx context.Context, t *target, dirty map[ObjectKey]intent) (*writePlan, error) {
	mode := t.spec.Prune
	keys := make([]ObjectKey, 0, len(dirty))
	for k := range dirty {
		keys = append(keys, k)
	}
	resolved := w.resolveVersions(t, keys)
	sort.Slice(keys, func(i, j int) bool { return planBefore(keys[i], keys[j], dirty, mode, resolved) })

	p := &writePlan{files: map[string][]byte{}, located: map[manifest.Identity]string{}, parsed: map[string]parsedFile{},
		present: map[manifest.Identity]bool{}, resolved: resolved,
		ahead: w.renderNew(ctx, t, slices.DeleteFunc(slices.Clone(keys), func(k ObjectKey) bool { _, ok := resolved[k]; return ok }))}
	tree := w.repo.TreeReader(w.remoteTip)
	read := func(path string) ([]byte, error) {
		if c, ok := p.files[path]; ok {
			return c, nil
		}
		c, _, err := tree.ReadFile(path)
		if ix := t.index.Load(); unwritablePath(err) && ix != nil && ix.of(t.spec.Folder) {
			if problem := ix.pathProblem(path); problem != "" {
				return nil, unwritableFile{problem: problem, err: err} // as admission says it
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errCloneRead, err)
		}
		return c, nil
	}
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := w.planOne(t, p, read, k, dirty[k]); err != nil {
			return nil, err
		}
	}
	p.lastPass = true
	for _, k := range p.heldBack {
		if err := w.planOne(t, p, read, k, dirty[k]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// planBefore orders a window's keys by identity; one object waiting at two versions of its
// resource (rules re-resolving after a CRD's preferred version moved: one version's rule
// saw it leave, the other's still selects it) is planned first at a version the cluster
// has it at (resolved), then write first, and the removal after it finds the object
// present and leaves it (planOne): the document is updated where it is, whatever order the
// map gave, and whichever of its versions saw it deleted and created again. Pure.
func planBefore(a, b ObjectKey, dirty map[ObjectKey]intent, mode string, resolved map[ObjectKey]resolution) bool {
	if ia, ib := a.Identity().String(), b.Identity().String(); ia != ib {
		return ia < ib
	}
	if pa, pb := resolved[a].present(), resolved[b].present(); pa != pb {
		return pa
	}
	if ra, rb := dirty[a].removes(mode), dirty[b].removes(mode); ra != rb {
		return rb
	}
	return a.GVR.Version < b.GVR.Version
}

// resolution is what the Resolver answered for a key.
type resolution struct {
	obj *unstructured.Unstructured
	err error
}

// present says the cluster holds the object.
func (r resolution) present() bool { return r.obj != nil && r.err == nil }

// resolveVersions reads, before the plan orders them, the keys of the objects that wait
// at more than one version of their resource: the order depends on which of them the
// cluster holds the object at. Rare, so the others are read as they are planned.
func (w *worker) resolveVersions(t *target, keys []ObjectKey) map[ObjectKey]resolution {
	versions := map[manifest.Identity]int{}
	for _, k := range keys {
		versions[k.Identity()]++
	}
	var out map[ObjectKey]resolution
	for _, k := range keys {
		if versions[k.Identity()] < 2 {
			continue
		}
		if out == nil {
			out = map[ObjectKey]resolution{}
		}
		obj, err := w.opts.Resolver.Current(t.spec.Key, k)
		out[k] = resolution{obj, err}
	}
	return out
}

// planOne plans one key of a window: the removal of its document when the object is gone
// (or left the selection of a rule that mirrors that), else the write of its current state.
func (w *worker) planOne(t *target, p *writePlan, read func(string) ([]byte, error), k ObjectKey, in intent) error {
	obj, done, err := w.currentOf(t, p, k, in)
	if err != nil || done {
		return err
	}
	if obj == nil {
		return w.planRemoval(t, p, read, k, in)
	}
	return w.planWrite(t, p, read, k, in, obj)
}

// currentOf reads what the cluster holds of k now: rendered ahead (renderNew), or from the
// Resolver. done is true when k plans nothing: no rule watches it any more, it left a
// selection that mirrors no removal, or its cache is not complete (deferred). A nil object
// with done false is a removal.
func (w *worker) currentOf(t *target, p *writePlan, k ObjectKey, in intent) (obj *unstructured.Unstructured, done bool, err error) {
	ahead, ok := p.ahead[k]
	obj = ahead.obj
	if r, read := p.resolved[k]; read {
		obj, err = r.obj, r.err
	} else if !ok {
		obj, err = w.opts.Resolver.Current(t.spec.Key, k)
	}
	switch {
	case errors.Is(err, ErrNotWatched):
		return nil, true, nil // left as Git has it
	case errors.Is(err, ErrNotSelected) && !in.removes(t.spec.Prune):
		return nil, true, nil // no removal seen: a rule deleted or narrowed meanwhile deletes nothing
	case errors.Is(err, ErrNotSelected):
		return nil, false, nil // it left the selection of a rule that mirrors that: a removal
	case errors.Is(err, ErrNotSynced) && in.removes(t.spec.Prune) && p.present[k.Identity()]:
		return nil, true, nil // the object exists at another version, and was planned: no removal waits
	case errors.Is(err, ErrNotSynced):
		p.deferKey(k, in, fmt.Errorf("reading %s: %w", k.Identity(), err))
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading %s: %w", k.Identity(), err)
	}
	return obj, false, nil
}

// planRemoval plans the removal of the document of k, an object the cluster no longer holds,
// when a removal was seen and the prune mode lets it go.
func (w *worker) planRemoval(t *target, p *writePlan, read func(string) ([]byte, error), k ObjectKey, in intent) error {
	id := k.Identity()
	file, exists := p.lookup(t.index.Load(), id)
	if p.present[id] {
		return nil // the same object at another version exists, and was planned (planBefore)
	}
	if p.waits[id] {
		p.deferKey(k, in, nil) // the same object at another version waits for its cache
		return nil
	}
	if !in.removes(t.spec.Prune) || !exists || t.spec.Prune == PruneNever {
		return nil // no removal seen: its delete, if a rule mirrors it, comes on its own
	}
	if n := sharedEncryptedFile(t.index.Load(), file); n > 0 {
		p.refuse(k, fmt.Sprintf("%s: not removed: %s", id, sharedProblem(file, n)))
		return nil
	}
	if err := removeFrom(p, read, id, file); errors.Is(err, errUnwritable) {
		p.refuse(k, fmt.Sprintf("%s: not removed: %v", id, err))
		return nil
	} else if err != nil {
		return err
	}
	p.located[id] = ""
	p.actions = append(p.actions, action{"Delete", id, file})
	return nil
}

// planWrite plans the write of obj, k's current state: into the file that holds its
// document, or a new one at its canonical path; refused (p.refuse) when the folder or the
// object says it cannot be written, and encrypted when it is sensitive.
func (w *worker) planWrite(t *target, p *writePlan, read func(string) ([]byte, error), k ObjectKey, in intent, obj *unstructured.Unstructured) error {
	id := k.Identity()
	file, exists := p.lookup(t.index.Load(), id)
	p.present[id] = true
	if exists && in.createOnly {
		return nil // its rules mirror creations only: the document Git has stays as it is
	}
	if !exists {
		if _, problem := misnamespaced(p, t.index.Load(), id); problem != "" {
			if skip, err := w.neverWritten(t, k, obj); err != nil || skip {
				return err // key material is skipped, as admission lets it through: nothing to fix
			}
			p.refuse(k, fmt.Sprintf("%s: not written: %s", id, problem))
			return nil
		}
	}
	if w.isSensitive(t, k.GVR.GroupResource()) {
		return w.planSensitive(t, p, read, k, obj, file, exists)
	}
	if problem := URLCredentialsProblem(k.GVR.GroupResource(), obj); problem != "" {
		if exists { // written by an earlier release, or by a person
			problem += fmt.Sprintf("; %s was written before and is left as it is: remove it from Git", file)
		}
		p.refuse(k, fmt.Sprintf("%s: not written: %s", id, problem))
		return nil
	}
	var forms *writtenForms
	if exists {
		f := w.forms(obj, true)
		if w.unchangedAtTip(t, p, id, obj, f) {
			return nil
		}
		forms = &f
	}
	path, content, ok, err := placeWrite(t, p, read, k, file, exists)
	if !ok || err != nil {
		return err
	}
	// HoldsEncrypted parses the file; a file without "sops" anywhere cannot have its key.
	if exists && bytes.Contains(content, []byte("sops")) && encrypt.HoldsEncrypted(content) {
		// Encrypted in Git: never written back in plaintext, even once its resource is no
		// longer declared sensitive or the target lost its keys (then it is refused).
		return w.planSensitive(t, p, read, k, obj, file, exists)
	}
	w.editInto(t, p, k, obj, path, content, exists, forms)
	return nil
}

// placeWrite finds and reads the file k's object is written into: file, which holds its
// document, or its canonical path when it has none (exists false). ok is false when k is
// refused for that path (p.refuse), or held back to the plan's last pass: a new file
// another object of the window took.
func placeWrite(t *target, p *writePlan, read func(string) ([]byte, error), k ObjectKey, file string, exists bool) (path string, content []byte, ok bool, err error) {
	id := k.Identity()
	path = file
	if !exists {
		if path, err = plan.CanonicalPath(t.spec.Folder, k.GVR, k.Namespace, k.Name, false); err != nil {
			p.refuse(k, fmt.Sprintf("%s: %v", id, err))
			return "", nil, false, nil
		}
	}
	content, err = read(path)
	if unwritablePath(err) {
		p.refuse(k, fmt.Sprintf("%s: not written: %v", id, err))
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("reading %s: %w", path, err)
	}
	if !exists {
		if other, held := heldByAnother(p.parsed, path, content, id); held {
			if p.lastPass {
				p.refuse(k, fmt.Sprintf("%s: not written: %s", id, heldProblem(path, other)))
			} else {
				p.heldBack = append(p.heldBack, k) // nothing planned for k yet: planned again at the end
			}
			return "", nil, false, nil
		}
	}
	return path, content, true, nil
}

// editInto writes obj into content, the file at path, and records the new content and its
// action in p; an edit that fails refuses k. A new object's own new file takes the edit
// made ahead on another core (renderNew), which is the same.
func (w *worker) editInto(t *target, p *writePlan, k ObjectKey, obj *unstructured.Unstructured, path string, content []byte, exists bool, forms *writtenForms) {
	id := k.Identity()
	var edited manifest.Edited
	var err error
	if ahead := p.ahead[k]; ahead.obj != nil && !exists && len(content) == 0 {
		edited, err = ahead.edited, ahead.err
	} else {
		if forms == nil {
			f := w.forms(obj, len(content) > 0)
			forms = &f
		}
		edited, err = manifest.UpsertIndexed(content, forms.writable(obj, content), t.style)
	}
	if err != nil {
		p.refuse(k, fmt.Sprintf("%s: cannot be written to %s: %v", id, path, err))
		return
	}
	if !edited.Changed {
		return
	}
	p.files[path] = edited.Content
	p.parsed[path] = parsedFile{content: edited.Content, docs: edited.Docs}
	verb := "Update"
	if !exists {
		verb = "Create"
	}
	p.actions = append(p.actions, action{verb, id, path})
	p.located[id] = path
}

// namespaceless finds the file holding a document that may be id's written without a
// namespace (as kubectl apply -n and Argo CD folders often are): same group, kind and name,
// no metadata.namespace. Writing id beside it would define the object twice for whoever
// deploys the folder.
func namespaceless(p *writePlan, ix *folderIndex, id manifest.Identity) (string, bool) {
	if id.Namespace == "" {
		return "", false
	}
	bare := id
	bare.Namespace = ""
	return p.lookup(ix, bare)
}

// misnamespaced says why id, which Git has no document of, is not written: a document that
// may be id's holds another namespace field — none for a namespaced id (namespaceless), one
// for a cluster-scoped id (a chart's output often sets metadata.namespace on a ClusterRole,
// which the API server ignores). Writing id beside it would define the object twice for
// whoever deploys the folder (Kustomize refuses the build). It returns that document's
// file and the problem; "" when no such document is.
func misnamespaced(p *writePlan, ix *folderIndex, id manifest.Identity) (file, problem string) {
	if other, ok := namespaceless(p, ix, id); ok {
		return other, namespacelessProblem(id, other)
	}
	if id.Namespace != "" || ix == nil {
		return "", ""
	}
	for _, other := range ix.namespacedLike(id) {
		if file, ok := p.lookup(ix, other); ok {
			return file, fmt.Sprintf("%s defines %s %s with metadata.namespace %s, which the API server ignores for a cluster-scoped object, "+
				"so it may be this object: remove the namespace from that document so the writer knows which object it is", file, id.Kind, id.Name, other.Namespace)
		}
	}
	return "", ""
}

// namespacelessProblem says why id is not written beside a document without a namespace.
func namespacelessProblem(id manifest.Identity, file string) string {
	return fmt.Sprintf("%s defines %s %s without metadata.namespace, which may be this object: "+
		"add namespace: %s to that document (or rename it) so the writer knows which object it is", file, id.Kind, id.Name, id.Namespace)
}

// heldByAnother returns an object that the file at path, holding content, defines while it
// does not define id: the canonical path of id is taken by someone else's document, which
// the writer neither edits around nor writes beside. A file that does not parse is left to
// the edit, which refuses it with its reason.
func heldByAnother(parsed map[string]parsedFile, path string, content []byte, id manifest.Identity) (manifest.Identity, bool) {
	if len(content) == 0 {
		return manifest.Identity{}, false
	}
	docs, ok := docsOf(parsed, path, content)
	if !ok {
		var err error
		if docs, err = manifest.Parse(content); err != nil {
			return manifest.Identity{}, false
		}
	}
	var other manifest.Identity
	held := false
	for _, d := range docs {
		if d.Empty {
			continue
		}
		if d.Identity == id {
			return manifest.Identity{}, false
		}
		if !held {
			other, held = d.Identity, true
		}
	}
	return other, held
}

// firstDocument returns the identity, among ids of one file, whose document comes first in
// it: the one heldByAnother names, so admission and the writer name the same object.
func firstDocument(idx *folderIndex, ids []manifest.Identity) manifest.Identity {
	first, at := ids[0], -1
	for _, id := range ids {
		if loc, ok := idx.lookup(id); ok && (at < 0 || loc.Doc < at) {
			first, at = id, loc.Doc
		}
	}
	return first
}

// unwritablePath reports whether reading an object's file failed for that path alone: an
// entry on the way is a file (a person's commit), or Git refuses the path (a name planning
// let through): the object is refused, its window's others are written.
func unwritablePath(err error) bool {
	return errors.Is(err, repo.ErrPathConflict) || errors.Is(err, repo.ErrInvalidPath)
}

// unwritableFile is a read of a path Git cannot hold the object's document at, told with
// the reason admission gives (folderIndex.pathProblem).
type unwritableFile struct {
	problem string
	err     error
}

func (u unwritableFile) Error() string { return u.problem }
func (u unwritableFile) Unwrap() error { return u.err }

// heldProblem says why an object is not written to its canonical path, which another
// object's document holds; admission (Locate) and the writer give the same reason.
func heldProblem(path string, other manifest.Identity) string {
	return fmt.Sprintf("%s already holds %s; move or rename that document in Git (the writer never puts two objects in a file it names after one)", path, other)
}

// errUnwritable marks a failure that concerns one object's file, not the window: the plan
// refuses that object (status lists it) and commits the others.
var errUnwritable = errors.New("the file cannot be edited")

// removeFrom plans the removal of id's document from file, and of the file when nothing
// else is left in it. A file that is not a regular file, or that the edit cannot remove
// the document from, is errUnwritable.
func removeFrom(p *writePlan, read func(string) ([]byte, error), id manifest.Identity, file string) error {
	content, err := read(file)
	if unwritablePath(err) {
		return fmt.Errorf("%w: %w", errUnwritable, err)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	out, empty, err := manifest.Remove(content, id)
	if err != nil {
		return fmt.Errorf("%w: removing %s from %s: %w", errUnwritable, id, file, err)
	}
	if empty {
		out = nil
	}
	p.files[file] = out
	return nil
}
