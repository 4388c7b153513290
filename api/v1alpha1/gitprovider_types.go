package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GitProviderSpec says which repository to write to and how to authenticate.
type GitProviderSpec struct {
	// URL of the Git repository: https://, http://, ssh://, git@host:path, or file:// for
	// local use. Immutable: point a new GitProvider at a new repository instead. A URL must
	// parse (a password in it has its special characters escaped), have no "@" after its host
	// (a token's "/" escaped as %2F) and carry no query or fragment: go-git cannot fetch from
	// such a URL, and its credentials could not be kept out of messages.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?://|ssh://|file://|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:).+')",message="url must start with https://, http://, ssh:// or file://, or be an scp-like address such as git@github.com:org/repo.git"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="url is immutable: create a GitProvider for the new repository and point GitTargets at it"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="url must not carry a query or fragment: go-git cannot fetch from such a URL; put a token in the secretRef Secret"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(https?|ssh)://[^/]*/.*@')",message="url has an '@' after its host: escape a '/' in its user info as %2F, or better, move the credentials into the secretRef Secret"
	// +kubebuilder:validation:XValidation:rule="!self.contains('://') || isURL(self)",message="url does not parse as a URL: escape the special characters of its user info, or better, move the credentials into the secretRef Secret"
	URL string `json:"url"`

	// SecretRef names a Secret in the same namespace with credentials. For HTTP(S): keys
	// `username` and `password` (basic auth; a token goes in `password`), or `bearerToken`.
	// For SSH: `identity` (private key, PEM or OpenSSH format), optional `password` for an
	// encrypted key, and `known_hosts` (required: the operator never trusts an unknown host).
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// AllowedBranches lists glob patterns (path.Match syntax, e.g. `main`, `env/*`) of branches
	// GitTargets may write to. A GitTarget on any other branch is refused.
	// +kubebuilder:default={"*"}
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	// +optional
	AllowedBranches []string `json:"allowedBranches,omitempty"`

	// Committer is the identity recorded as committer on every commit the operator makes,
	// and as author when no authenticated user could be joined to the changes.
	// +optional
	Committer *Committer `json:"committer,omitempty"`
}

// Committer is a Git identity.
type Committer struct {
	// Name of the committer.
	// +kubebuilder:default="GitOps Reverser"
	// +kubebuilder:validation:MinLength=1
	// +optional
	Name string `json:"name,omitempty"`
	// Email of the committer.
	// +kubebuilder:default="gitops-reverser@localhost"
	// +kubebuilder:validation:MinLength=1
	// +optional
	Email string `json:"email,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name of the referent.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// GitProviderStatus reports whether the repository is reachable with the given credentials.
type GitProviderStatus struct {
	// ObservedGeneration is the last generation a reconcile reached a verdict on; one cut
	// short by a passing error leaves it behind (its conditions may already name the new one).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// URL is spec.url without any credentials it carries (user info, query), for display:
	// kubectl's URL column shows it, so a token in spec.url never reaches a screen or a CI log.
	// +optional
	URL string `json:"url,omitempty"`
	// Conditions: Ready, Reconciling, Stalled (kstatus).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GitProvider is a Git repository the operator may write to, with its credentials and the
// branches it may touch.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gp,categories=gitops-reverser
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GitProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GitProviderSpec   `json:"spec"`
	Status GitProviderStatus `json:"status,omitempty"`
}

// GitProviderList is a list of GitProviders.
// +kubebuilder:object:root=true
type GitProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GitProvider `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GitProvider{}, &GitProviderList{})
}
