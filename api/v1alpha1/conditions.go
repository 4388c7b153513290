package v1alpha1

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types shared by every kind, following kstatus so that `kubectl wait
// --for=condition=Ready` and generic tooling understand the objects.
const (
	// ConditionReady is True when the object does its job right now.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator is working towards Ready.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a human: the reason says what to fix.
	ConditionStalled = "Stalled"
)

// Domain condition types.
const (
	// ConditionFolderReady says whether the GitTarget's folder can be owned and written.
	ConditionFolderReady = "FolderReady"
	// ConditionResourcesResolved says whether every resource of a watch rule was found.
	ConditionResourcesResolved = "ResourcesResolved"
	// ConditionCommitted says whether a CommitRequest's message reached Git: True with the
	// commit, False with the reason it never will (or, with Reconciling, that it waits).
	ConditionCommitted = "Committed"
	// ConditionEncryptionReady says whether a GitTarget can encrypt sensitive objects; the
	// admission webhook denies sensitive writes to a target where it is not True.
	ConditionEncryptionReady = "EncryptionReady"
)

// Reasons used in conditions; stable strings so alerts and tests can match on them. The
// final and waiting reasons of a CommitRequest's Committed condition (Committed,
// NothingToCommit, TimedOut, TargetRemoved, TargetStalled; Retrying as here) are set by the
// writer, which does not depend on this package: see gitops/batch (author.go).
const (
	ReasonSucceeded      = "Succeeded"
	ReasonInvalidSecret  = "InvalidSecret"
	ReasonInvalidURL     = "InvalidURL"
	ReasonSecretNotFound = "SecretNotFound"
	ReasonUnreachable    = "Unreachable"
	// ReasonAccessDenied: the remote answered and rejected the GitProvider's credentials
	// (HTTP 401, an SSH key not accepted) or showed a host key other than the one in
	// known_hosts: a fix in the Secret or on the Git server, not an outage.
	ReasonAccessDenied     = "AccessDenied"
	ReasonProviderNotFound = "ProviderNotFound"
	ReasonProviderNotReady = "ProviderNotReady"
	ReasonBranchNotAllowed = "BranchNotAllowed"
	// ReasonPathNotAllowed: a GitTarget's spec.path is one the writer refuses (a .git
	// segment), stored before the CRD's rules refused it.
	ReasonPathNotAllowed = "PathNotAllowed"
	// ReasonFolderOverlap: the GitTarget's folder is, contains or lies inside the folder of
	// an older GitTarget on the same repository and branch; the older one writes.
	ReasonFolderOverlap      = "FolderOverlap"
	ReasonUnsupportedContent = "UnsupportedContent"
	ReasonTargetNotFound     = "TargetNotFound"
	ReasonResourceNotFound   = "ResourceNotFound"
	ReasonInvalidRule        = "InvalidRule"
	ReasonWriteFailed        = "WriteFailed"
	ReasonInvalidTemplate    = "InvalidTemplate"
	ReasonWaiting            = "Waiting"
	ReasonRequesterUnknown   = "RequesterUnknown"
	// ReasonObjectsRefused: a GitTarget writes, but some objects routed to it are not
	// written (Ready stays True); the message names them and what to fix.
	ReasonObjectsRefused = "ObjectsRefused"
	// ReasonDiscoveryFailed: an API a rule's resources belong to, or may belong to, could not
	// be discovered (an aggregated API down); the rule keeps watching those it watched and
	// takes the others once the API answers.
	ReasonDiscoveryFailed = "DiscoveryFailed"
	// ReasonListFailed: a resource the rule resolved could not be listed since its watch
	// started (a CRD's conversion webhook down, a permission missing): nothing of it is
	// captured until it lists; the message quotes the error.
	ReasonListFailed = "ListFailed"
	// ReasonRetrying: a step of the reconcile failed for a reason that may pass (the API
	// server did not answer, a temporary file could not be written); it is retried with
	// backoff and the message quotes the error. Ready no longer claims what was last
	// checked when a later check cannot run.
	ReasonRetrying = "Retrying"
	// ReasonDeleting: the GitTarget is deleted and kept only by finalizers (a foreground
	// deletion waits for the Secrets it owns); it writes nothing more.
	ReasonDeleting = "Deleting"
)

// EncryptionReady reasons: each names what to fix.
const (
	// ReasonEncryptionNotConfigured: spec.encryption.age is not set.
	ReasonEncryptionNotConfigured = "EncryptionNotConfigured"
	// ReasonNoRecipients: neither spec recipients nor identities in the Secret.
	ReasonNoRecipients = "NoRecipients"
	// ReasonMalformedKey: a recipient, identity or digest key does not parse; the message
	// names it by position, never by content.
	ReasonMalformedKey = "MalformedKey"
	// ReasonNoIdentity: the referenced Secret holds no identity and generateWhenMissing is off.
	ReasonNoIdentity = "NoIdentity"
	// ReasonSecretUnreadable: the referenced Secret exists but cannot be read.
	ReasonSecretUnreadable = "SecretUnreadable"
	// ReasonSecretUnwritable: the API server refuses to store a key the operator made (a
	// generated identity, the digest key): an invalid name, an immutable Secret, a quota or
	// a policy. Retrying cannot help until that changes; the target writes everything else.
	ReasonSecretUnwritable = "SecretUnwritable"
)

// SetReady records success: Ready=True, and clears Reconciling and Stalled.
func SetReady(conds *[]metav1.Condition, gen int64, reason, msg string) {
	set(conds, gen, ConditionReady, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(conds, ConditionReconciling)
	meta.RemoveStatusCondition(conds, ConditionStalled)
}

// SetStalled records a problem only a human can fix: Stalled=True, Ready=False.
func SetStalled(conds *[]metav1.Condition, gen int64, reason, msg string) {
	set(conds, gen, ConditionReady, metav1.ConditionFalse, reason, msg)
	set(conds, gen, ConditionStalled, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(conds, ConditionReconciling)
}

// SetReconciling records progress or a transient failure: Reconciling=True, Ready=False.
func SetReconciling(conds *[]metav1.Condition, gen int64, reason, msg string) {
	set(conds, gen, ConditionReady, metav1.ConditionFalse, reason, msg)
	set(conds, gen, ConditionReconciling, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(conds, ConditionStalled)
}

// SetCondition sets a domain condition.
func SetCondition(conds *[]metav1.Condition, gen int64, typ string, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	set(conds, gen, typ, st, reason, msg)
}

func set(conds *[]metav1.Condition, gen int64, typ string, st metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: fitMessage(msg), ObservedGeneration: gen})
}

// MaxMessage is the longest condition message written: the API server refuses a status
// whose condition message is longer than 32768 bytes (metav1.Condition), and a status it
// refuses is never written, the reconcile failing at every retry.
const MaxMessage = 32768

// fitMessage cuts msg to MaxMessage bytes, on a character boundary, ending in "…".
func fitMessage(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	const more = "…"
	cut := MaxMessage - len(more)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + more
}

// GetConditions returns the GitTarget's conditions, so code that treats every kind of this
// API alike (status.OwnChanges) can read them.
func (t *GitTarget) GetConditions() []metav1.Condition { return t.Status.Conditions }

// GetConditions returns the GitProvider's conditions (see GitTarget.GetConditions).
func (p *GitProvider) GetConditions() []metav1.Condition { return p.Status.Conditions }

// GetConditions returns the WatchRule's conditions (see GitTarget.GetConditions).
func (r *WatchRule) GetConditions() []metav1.Condition { return r.Status.Conditions }

// GetConditions returns the ClusterWatchRule's conditions (see GitTarget.GetConditions).
func (r *ClusterWatchRule) GetConditions() []metav1.Condition { return r.Status.Conditions }

// GetConditions returns the CommitRequest's conditions (see GitTarget.GetConditions).
func (r *CommitRequest) GetConditions() []metav1.Condition { return r.Status.Conditions }
