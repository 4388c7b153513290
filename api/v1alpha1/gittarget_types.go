package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DigestSecretSuffix names the Secret holding a GitTarget's digest key (recipients-only
// encryption): `<gittarget>-sops-digest` in its namespace, owned by the GitTarget.
const DigestSecretSuffix = "-sops-digest"

// KeySecrets names the Secrets holding the GitTarget's keys: its digest key and, with
// spec.encryption.age.secretRef, its age identities. No GitTarget writes them to Git,
// whichever rule routes them (another tenant's target included), and admission skips
// them like key material, so an empty placeholder for generateWhenMissing is not judged
// a plaintext Secret. None without spec.encryption.
func (t *GitTarget) KeySecrets() []types.NamespacedName {
	if t.Spec.Encryption == nil {
		return nil
	}
	out := []types.NamespacedName{{Namespace: t.Namespace, Name: t.Name + DigestSecretSuffix}}
	if age := t.Spec.Encryption.Age; age != nil && age.SecretRef != nil {
		out = append(out, types.NamespacedName{Namespace: t.Namespace, Name: age.SecretRef.Name})
	}
	return out
}

// GitTargetSpec is a folder on a branch of a GitProvider's repository.
type GitTargetSpec struct {
	// ProviderRef names the GitProvider (same namespace) whose repository holds the folder.
	ProviderRef LocalObjectReference `json:"providerRef"`

	// Branch to write to; created from nothing when missing. Must match the provider's
	// allowedBranches. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9._/-]+$')",message="branch may hold only letters, digits, '.', '_', '-' and '/', e.g. main or env/prod"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '')",message="branch must be a valid Git branch name: no '/' at either end and no '//'"
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.endsWith('.') && !self.startsWith('-')",message="branch must be a valid Git branch name: no '..', no '.' at the end and no '-' at the start"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s.startsWith('.') || s.endsWith('.lock'))",message="branch must be a valid Git branch name: no part between '/' may start with '.' or end with '.lock'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="branch is immutable: create a GitTarget for the new branch and delete this one"
	Branch string `json:"branch"`

	// Path of the folder inside the repository, relative to its root, e.g. `clusters/prod`.
	// Nothing is ever written outside it. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$')",message="path must be relative to the repository's root, with segments of letters, digits, '.', '_' and '-' joined by single '/' and no '/' at either end, e.g. clusters/prod"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..' || s == '.')",message="path must not contain '.' or '..' segments"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s.lowerAscii() == '.git')",message="path must not contain a .git segment, in any letter case: Git refuses such a path"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="path is immutable: create a GitTarget for the new folder and delete this one"
	Path string `json:"path"`

	// CommitWindow says how changes are grouped into commits.
	// +kubebuilder:default={}
	// +optional
	CommitWindow CommitWindow `json:"commitWindow,omitempty"`

	// CommitMessage holds Go text/template templates for commit messages; empty fields use
	// the defaults. Variables are listed in docs/configuration.md. Templates that do not
	// parse or render are refused.
	// +optional
	CommitMessage CommitMessage `json:"commitMessage,omitempty"`

	// Prune says what happens to documents whose objects are gone.
	// +kubebuilder:default={}
	// +optional
	Prune Prune `json:"prune,omitempty"`

	// Encryption makes sensitive objects (core Secrets, the operator's
	// --sensitive-resources and SensitiveResources below) reach Git only as SOPS files
	// encrypted with age. Without it, sensitive objects routed to this target are denied at
	// admission and never written.
	// +optional
	Encryption *Encryption `json:"encryption,omitempty"`
}

// Encryption says what must be encrypted and for whom.
type Encryption struct {
	// SensitiveResources adds resources whose objects must never reach Git in plaintext,
	// besides core Secrets and the operator's --sensitive-resources flag.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	SensitiveResources []GroupResource `json:"sensitiveResources,omitempty"`

	// Age holds the keys sensitive objects are encrypted for. Without it sensitive objects
	// are refused.
	// +optional
	Age *AgeEncryption `json:"age,omitempty"`
}

// GroupResource names a resource of an API group.
type GroupResource struct {
	// Group is the API group; "" is the core group.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group"`
	// Resource is the plural resource name, e.g. `sealedsecrets`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="resource must be a plural resource name in lower case, e.g. sealedsecrets (the NAME column of kubectl api-resources)"
	Resource string `json:"resource"`
}

// AgeEncryption names age recipients directly and/or through a Secret of identities.
// Files are encrypted for every recipient listed and for the public key of every identity
// in the Secret, so the operator can open what it wrote and change only the values that
// changed.
// +kubebuilder:validation:XValidation:rule="(has(self.recipients) && size(self.recipients) > 0) || has(self.secretRef)",message="age needs recipients or secretRef"
// +kubebuilder:validation:XValidation:rule="!has(self.generateWhenMissing) || !self.generateWhenMissing || has(self.secretRef)",message="generateWhenMissing needs secretRef: the Secret that receives the generated identity"
type AgeEncryption struct {
	// Recipients are age X25519 public keys (`age1...`). Never put a private key here.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.all(r, r.startsWith('age1'))",message="recipients must be age public keys (age1...), never private keys"
	// +listType=atomic
	// +optional
	Recipients []string `json:"recipients,omitempty"`

	// SecretRef names a Secret in the GitTarget's namespace whose data keys ending in
	// `.agekey` hold age identities (the format Flux's kustomize-controller reads). Their
	// public keys are added to the recipients, and the operator uses them to compare
	// without ciphertext churn.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// GenerateWhenMissing creates an X25519 identity in the SecretRef Secret (and the
	// Secret itself) when it holds none, annotates the Secret with the public key, and
	// emits a Warning Event: back the Secret up, it holds the only copy of the key.
	// +optional
	GenerateWhenMissing bool `json:"generateWhenMissing,omitempty"`
}

// Prune controls deletions in Git.
type Prune struct {
	// Mode: `OnEvent` mirrors deletions seen while running and keeps documents of objects
	// deleted while the operator was down, counting them in status.orphans; `Always` also
	// removes those, but only after a complete list of the same resources and namespaces;
	// `Never` never removes a document, not even on a delete event.
	// +kubebuilder:validation:Enum=OnEvent;Always;Never
	// +kubebuilder:default=OnEvent
	// +optional
	Mode string `json:"mode,omitempty"`
}

// CommitMessage templates: one for a commit holding a single change, one for a group.
type CommitMessage struct {
	// Single renders a commit with one change. Default: `{{.Verb}} {{.Object}}`, e.g.
	// "Update ConfigMap team-a/app".
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Single string `json:"single,omitempty"`
	// Group renders a commit with several changes. Default: a first line like
	// "team-a/live: 3 changes by alice" followed by one line per change.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Group string `json:"group,omitempty"`
}

// CommitWindow groups changes into one commit. A window closes when no change arrived for
// Quiet, when its first change is MaxDelay old, or when it holds MaxChanges objects,
// whichever comes first.
type CommitWindow struct {
	// Quiet is how long no new change must arrive before the window commits. `0s` commits
	// each change at once.
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="size(self) <= 16 && self.matches('^(0|(([0-9]{1,6}([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",message="must be a duration of 0s or more written as Go writes one, such as 5s, 1m30s or 2h (no spaces, no days, at most 16 characters and 6 digits before a unit)"
	// +optional
	Quiet *metav1.Duration `json:"quiet,omitempty"`
	// MaxDelay bounds how long a change waits, so that a steady trickle still commits.
	// `0s` sets no bound: only Quiet and MaxChanges close a window.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="size(self) <= 16 && self.matches('^(0|(([0-9]{1,6}([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",message="must be a duration of 0s or more written as Go writes one, such as 5s, 1m30s or 2h (no spaces, no days, at most 16 characters and 6 digits before a unit)"
	// +optional
	MaxDelay *metav1.Duration `json:"maxDelay,omitempty"`
	// MaxChanges closes the window once it holds this many distinct objects.
	// +kubebuilder:default=500
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxChanges *int32 `json:"maxChanges,omitempty"`
}

// GitTargetStatus reports whether the folder can be written and what was last committed.
type GitTargetStatus struct {
	// ObservedGeneration is the last generation a reconcile reached a verdict on; one cut
	// short by a passing error leaves it behind (its conditions may already name the new one).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling, Stalled (kstatus), FolderReady (the folder verdict)
	// and EncryptionReady (whether sensitive objects can be encrypted).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Repository is the URL of the provider's repository, for display.
	// +optional
	Repository string `json:"repository,omitempty"`
	// LastCommit is the newest commit on the branch, as the operator last saw or pushed it.
	// +optional
	LastCommit *CommitInfo `json:"lastCommit,omitempty"`
	// ObjectCount is the number of Kubernetes objects in the folder.
	// +optional
	ObjectCount int32 `json:"objectCount"`
	// Orphans is the number of documents in the folder whose objects the last complete list
	// of their resource did not find, and which stay: all of them under prune.mode OnEvent
	// or Never; under Always those no rule with DELETE would select (the others are removed).
	// +optional
	Orphans int32 `json:"orphans,omitempty"`
}

// CommitInfo identifies a pushed commit.
type CommitInfo struct {
	// SHA of the commit.
	SHA string `json:"sha"`
	// Time the commit was made.
	Time metav1.Time `json:"time"`
}

// GitTarget is a folder on a branch where captured objects are written as YAML.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gt,categories=gitops-reverser
// +kubebuilder:printcolumn:name="Branch",type=string,JSONPath=`.spec.branch`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.path`
// +kubebuilder:printcolumn:name="Objects",type=integer,JSONPath=`.status.objectCount`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.lastCommit.sha`,priority=1
// +kubebuilder:printcolumn:name="Encryption",type=string,JSONPath=`.status.conditions[?(@.type=="EncryptionReady")].status`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GitTarget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GitTargetSpec   `json:"spec"`
	Status GitTargetStatus `json:"status,omitempty"`
}

// GitTargetList is a list of GitTargets.
// +kubebuilder:object:root=true
type GitTargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GitTarget `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GitTarget{}, &GitTargetList{})
}
