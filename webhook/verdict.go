// Package webhook is the admission front door: it denies, before a change is stored, what
// the Git writer could not write (an unwritable folder, a plaintext Secret, a path clash),
// keeps the ValidatingWebhookConfiguration's rules equal to what is watched, and validates
// the operator's own resources.
package webhook

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// Operation is an admission operation.
type Operation string

// Admission operations that reach the watched-objects webhook.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Request is what a decision needs to know about one admission request.
type Request struct {
	Operation Operation
	Resource  schema.GroupResource
	Kind      string
	Namespace string
	Name      string
	DryRun    bool
	// ReadableFields are the top-level fields a sensitive object has besides those that
	// may stay readable (batch.ReadableFields); filled only for sensitive objects.
	ReadableFields []string
	// KeyMaterial says the object is a Secret no target ever writes (batch.HoldsKeyMaterial,
	// or a GitProvider's credentials): admission has nothing to judge for Git.
	KeyMaterial bool
	// CredentialsProblem says why the object, a GitProvider whose spec.url carries
	// credentials, cannot be written in plaintext (batch.URLCredentialsProblem); "" otherwise.
	CredentialsProblem string
	// ByCluster says the request comes from kube-controller-manager (byCluster: the
	// namespace controller, the garbage collector…), whose writes must not wait on a
	// folder.
	ByCluster bool
}

// passesStall says whether a change is let through a Stalled target: a change of the
// operator's own resources (a GitProvider created after its GitTarget, a template or
// branch fixed, a rule or target deleted), which may be what ends the stall, and any write
// of the cluster's own controllers: a controller cannot fix a folder, it retries, and the
// cluster would wait on Git meanwhile (a namespace terminating, a garbage collector's
// cascade, the default ServiceAccount of a new namespace, a StatefulSet's claims, a volume
// bound). Like every change a Stalled target keeps, it is written once the folder can be
// written again. Pure.
func passesStall(req Request) bool {
	return req.Resource.Group == v1alpha1.GroupVersion.Group || req.ByCluster
}

// TargetState is the webhook's in-memory picture of one GitTarget a request routes to.
type TargetState struct {
	Key    types.NamespacedName
	URL    string
	Branch string
	Folder string
	// Stalled is true when the target cannot write (folder content, branch, credentials);
	// StalledMessage is the reason from its status.
	Stalled        bool
	StalledMessage string
	// EncryptionReady says the target can encrypt sensitive objects (its EncryptionReady
	// condition is True); EncryptionMessage is that condition's message, naming what to fix.
	EncryptionReady   bool
	EncryptionMessage string
	// EncryptionUnchecked says the condition describes an older spec: the target changed
	// and its encryption was not checked again yet, whatever the old verdict said.
	EncryptionUnchecked bool
	// KeepsDeleted says the target never removes a document (spec.prune.mode Never): a
	// deletion changes nothing in its folder, so it is never denied — not even while the
	// folder is Stalled, which would otherwise keep a namespace from terminating.
	KeepsDeleted bool
	// Leaving says the update moves the object out of every rule of this target that
	// selects it: the target deletes its document, so nothing of it is written.
	Leaving bool
	// SensitiveResources are the target's own sensitive resources
	// (spec.encryption.sensitiveResources), besides the operator-wide ones.
	SensitiveResources []schema.GroupResource
	// Path is where the object would land ("" when it cannot be planned) and PathProblem
	// says why it cannot land there (outside the folder, held by another object).
	Path        string
	PathProblem string
	// Encrypted says the object's document at Path is encrypted in Git: the writer keeps it
	// encrypted whatever its resource, so it is judged as a sensitive object is.
	Encrypted bool
	// Absent says the folder holds no document of the object (batch.Location.Absent): a
	// deletion removes nothing there.
	Absent bool
	// RemovalProblem says why the writer would not remove the object's document
	// (batch.Location.RemovalProblem): a deletion, or a change that takes the object out of
	// the target's rules, is denied for it, as a write the writer would refuse is.
	RemovalProblem string
}

// Reason codes, used as the metric label and in the denial's status reason.
const (
	ReasonAllowed         = "Allowed"
	ReasonTargetStalled   = "TargetStalled"
	ReasonPlaintextSecret = "PlaintextSensitive"
	ReasonReadableFields  = "ReadableSensitiveFields"
	ReasonPathConflict    = "PathConflict"
	ReasonURLCredentials  = "CredentialsInURL"
	ReasonNotRouted       = "NotRouted"
	ReasonSkipped         = "SkippedClusterManaged"
	ReasonKeyMaterial     = "SkippedKeyMaterial"
	// ReasonUnchanged: an update that stores nothing new, allowed whatever the verdict on a
	// change would be.
	ReasonUnchanged = "Unchanged"
	// ReasonNothingForGit: an update that changes nothing the writer would commit (fields
	// only the cluster's controllers own, status, the finalizers of an object being
	// deleted), allowed whatever the verdict on a change would be.
	ReasonNothingForGit = "NothingForGit"
	// ReasonUndecodable: the request's object could not be decoded; the answer is an error
	// (code 400 in the admission response), which the API server takes as a denial whatever
	// the webhook's failurePolicy (that decides only for a call that fails).
	ReasonUndecodable = "Undecodable"
)

// Verdict is the outcome of a decision.
type Verdict struct {
	Allowed  bool
	Reason   string
	Message  string
	Warnings []string
	// errored marks a request answered with an error rather than a verdict (metrics only).
	errored bool
}

// Decide is the admission verdict for a watched object: deny when any target it routes to
// could not write it, otherwise allow, with a warning naming where it lands when warn is
// set (dry-run, or every request by flag). It does no I/O.
func Decide(req Request, targets []TargetState, sensitive bool, warn bool) Verdict {
	if len(targets) == 0 {
		return Verdict{Allowed: true, Reason: ReasonNotRouted}
	}
	obj := describe(req)
	if req.KeyMaterial {
		v := Verdict{Allowed: true, Reason: ReasonKeyMaterial}
		if warn {
			v.Warnings = []string{obj + " holds key material (an age private key, or the " + batch.KeyMaterialLabel +
				" label) or a GitProvider's credentials and is never written to Git, whichever rule routes it"}
		}
		return v
	}
	for _, t := range targets {
		if t.KeepsDeleted && (req.Operation == Delete || t.Leaving) {
			continue // nothing to write
		}
		if t.Stalled && !passesStall(req) {
			return deny(ReasonTargetStalled, stalledDenial(obj, req.Operation, t))
		}
		if req.Operation == Delete || t.Leaving {
			if t.RemovalProblem != "" && !req.ByCluster { // the cluster's own: see passesStall
				return deny(ReasonPathConflict, fmt.Sprintf("%s cannot be removed from GitTarget %s: %s", obj, t.Key, t.RemovalProblem))
			}
			continue
		}
		if isSensitive := sensitive || slices.Contains(t.SensitiveResources, req.Resource); isSensitive && !t.EncryptionReady {
			return deny(ReasonPlaintextSecret, plaintextDenial(obj, req.Resource.String(), t))
		} else if !isSensitive && req.CredentialsProblem != "" { // as the writer: before a file encrypted in Git
			return deny(ReasonURLCredentials, fmt.Sprintf("%s cannot be written to GitTarget %s: %s", obj, t.Key, req.CredentialsProblem))
		} else if (isSensitive || (t.Encrypted && t.PathProblem == "")) && len(req.ReadableFields) > 0 {
			encryptedFile := ""
			if !isSensitive {
				encryptedFile = t.Path
			}
			return deny(ReasonReadableFields, fmt.Sprintf("%s cannot be written to GitTarget %s: %s", obj, t.Key,
				batch.ReadableProblem(req.Resource, req.ReadableFields, encryptedFile)))
		}
		if t.PathProblem != "" {
			return deny(ReasonPathConflict, fmt.Sprintf("%s cannot be written to GitTarget %s: %s", obj, t.Key, t.PathProblem))
		}
	}
	v := Verdict{Allowed: true, Reason: ReasonAllowed}
	if warn {
		for _, t := range targets {
			if w := landing(req.Operation, t); w != "" {
				v.Warnings = append(v.Warnings, w)
			}
		}
	}
	return v
}

// DecideRelabel is the admission verdict on a namespace's new labels (req, an update of the
// namespace; moves, View.Relabelled): deny when they bring its objects into a GitTarget that
// could not write them — one that is Stalled, or, for rules taking a sensitive resource, one
// that cannot encrypt — or take them out of a Stalled one, whose folder cannot lose their
// documents now (unless it keeps them, spec.prune.mode Never). Without it a label would move
// a whole namespace where each of its objects, written one by one, is denied. It judges the
// rules, not the objects: the webhook holds none of them, so a namespace without any is
// judged as one with some, as the next object created there would be. sensitive are the
// operator's --sensitive-resources; core Secrets always are. It does no I/O.
func DecideRelabel(req Request, moves []Move, sensitive []schema.GroupResource) Verdict {
	for _, m := range moves {
		t := m.Target
		if !m.Joins && t.KeepsDeleted {
			continue // nothing removed
		}
		if t.Stalled && !req.ByCluster { // as passesStall: the cluster's own controllers pass
			return deny(ReasonTargetStalled, relabelStalledDenial(req.Name, m))
		}
		if !m.Joins || t.EncryptionReady {
			continue
		}
		if grs := sensitiveAmong(m.Resources, t.SensitiveResources, sensitive); len(grs) > 0 {
			obj := fmt.Sprintf("Namespace %s cannot be relabelled: its new labels bring its objects of %s into the rules of GitTarget %s, where each",
				req.Name, resourceNames(grs), t.Key)
			return deny(ReasonPlaintextSecret, plaintextDenial(obj, resourceNames(grs), t))
		}
	}
	return Verdict{Allowed: true, Reason: ReasonAllowed}
}

// relabelStalledDenial says why new labels that move a namespace's objects into or out of a
// Stalled GitTarget are denied, and what lets them through.
func relabelStalledDenial(namespace string, m Move) string {
	t, way := m.Target, "take its objects of %s out of"
	if m.Joins {
		way = "bring its objects of %s into"
	}
	msg := fmt.Sprintf("Namespace %s cannot be relabelled: its new labels "+way+" the rules of GitTarget %s (%s branch %s, folder %s), "+
		"which cannot be written: %s. Retry once GitTarget %s is Ready again (kubectl get gittarget -n %s %s), or keep the labels as they are",
		namespace, resourceNames(m.Resources), t.Key, t.URL, t.Branch, t.Folder, t.StalledMessage, t.Key, t.Key.Namespace, t.Key.Name)
	if !m.Joins {
		msg += "; a relabel that takes objects out goes through meanwhile only where the GitTarget sets spec.prune.mode: Never"
	}
	return msg
}

// sensitiveAmong lists the sensitive resources (core Secrets, the operator's, the
// target's own) that rules naming grs take, "*" standing for any group or resource. Pure.
func sensitiveAmong(grs, targets, operators []schema.GroupResource) []schema.GroupResource {
	known := append(append([]schema.GroupResource{{Resource: "secrets"}}, operators...), targets...)
	var out []schema.GroupResource
	for _, s := range known {
		for _, gr := range grs {
			if (gr.Group == "*" || gr.Group == s.Group) && (gr.Resource == "*" || gr.Resource == s.Resource) && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// resourceNames lists resources as a message names them: "secrets, configmaps", a "*" quoted.
func resourceNames(grs []schema.GroupResource) string {
	names := make([]string, len(grs))
	for i, gr := range grs {
		names[i] = gr.String()
		if strings.Contains(names[i], "*") {
			names[i] = fmt.Sprintf("%q", names[i])
		}
	}
	return strings.Join(names, ", ")
}

// landing is the warning that says what an allowed write does in target t's folder: where
// the object lands, or, for a delete, the document it removes (or keeps, under prune mode
// Never); "" when nothing is known to say, or a delete finds no document to remove.
func landing(op Operation, t TargetState) string {
	switch {
	case t.Path == "" || t.Leaving || (op == Delete && (t.PathProblem != "" || t.Absent)): // another object's file, or none
		return ""
	case op == Delete && t.KeepsDeleted:
		return fmt.Sprintf("%s %s:%s is kept (GitTarget %s: spec.prune.mode Never)", t.URL, t.Branch, t.Path, t.Key)
	case op == Delete && t.RemovalProblem != "": // allowed only for the cluster's own controllers
		return ""
	case op == Delete:
		return fmt.Sprintf("%s %s:%s is removed", t.URL, t.Branch, t.Path)
	}
	return fmt.Sprintf("%s %s:%s", t.URL, t.Branch, t.Path)
}

// stalledDenial says why a change routed to a Stalled GitTarget is denied, and that the
// fix lies with the target (whose owner may be someone else), not with the object.
func stalledDenial(obj string, op Operation, t TargetState) string {
	msg := fmt.Sprintf("%s cannot be mirrored: GitTarget %s (%s branch %s, folder %s) cannot be written: %s. "+
		"Changing this object does not help: retry once GitTarget %s is Ready again (kubectl get gittarget -n %s %s)",
		obj, t.Key, t.URL, t.Branch, t.Folder, t.StalledMessage, t.Key, t.Key.Namespace, t.Key.Name)
	if op == Delete || t.Leaving {
		msg += "; a deletion (or a change that takes the object out of a rule) goes through meanwhile only where the GitTarget sets spec.prune.mode: Never"
	}
	return msg
}

// plaintextDenial says why a sensitive object is denied and what to configure.
// routed names the resources whose routing to the target is to stop.
func plaintextDenial(obj, routed string, t TargetState) string {
	if t.EncryptionUnchecked {
		last := ""
		if t.EncryptionMessage != "" {
			last = fmt.Sprintf(" (its last check, of the older spec: %s)", t.EncryptionMessage)
		}
		return fmt.Sprintf("%s would be stored in plaintext: GitTarget %s is new or changed and its encryption has not been checked for its current spec yet%s; "+
			"retry once it is (kubectl wait --for=condition=EncryptionReady -n %s gittarget/%s), or stop routing %s to it",
			obj, t.Key, last, t.Key.Namespace, t.Key.Name, routed)
	}
	if t.EncryptionMessage != "" { // the condition already says what to fix
		return fmt.Sprintf("%s would be stored in plaintext: GitTarget %s has no working encryption (%s); "+
			"fix that or stop routing %s to it", obj, t.Key, t.EncryptionMessage, routed)
	}
	return fmt.Sprintf("%s would be stored in plaintext: GitTarget %s has no working encryption (its encryption has not been checked yet); "+
		"configure encryption on GitTarget %s (spec.encryption.age.recipients with age public keys, or "+
		"spec.encryption.age.secretRef to a Secret of age identities, optionally with generateWhenMissing: true) "+
		"or stop routing %s to it", obj, t.Key, t.Key, routed)
}

func deny(reason, msg string) Verdict {
	return Verdict{Reason: reason, Message: msg}
}

func describe(r Request) string {
	kind := r.Kind
	if r.Resource.Group != "" {
		kind = r.Resource.Group + "/" + kind
	}
	if r.Namespace == "" {
		return strings.TrimSpace(kind + " " + r.Name)
	}
	return fmt.Sprintf("%s %s/%s", kind, r.Namespace, r.Name)
}
