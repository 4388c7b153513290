package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CommitRequestSpec asks for the requester's pending changes on one GitTarget to be
// committed now, with a message a person wrote.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; create a new CommitRequest"
type CommitRequestSpec struct {
	// TargetRef names the GitTarget, in the CommitRequest's namespace.
	TargetRef LocalObjectReference `json:"targetRef"`
	// Message is the commit message (first line = subject), used as written less the blank
	// space around it, as git commit does; blank alone, it would make an empty message.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="self.trim() != ''",message="message must not be blank: write what the commit does"
	Message string `json:"message"`
	// Timeout bounds the wait for the requester's next change when none is pending on the
	// target when the request arrives. `0s` waits for none: with no window of the
	// requester's open, the request ends TimedOut at once.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="size(self) <= 16 && self.matches('^(0|(([0-9]{1,6}([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",message="must be a duration of 0s or more written as Go writes one, such as 5s, 1m30s or 2h (no spaces, no days, at most 16 characters and 6 digits before a unit)"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Requester is the user the API server authenticated for the creation of this
	// CommitRequest. The admission webhook sets it; a value given by the client is
	// replaced, so only the requester's own changes are committed with the message.
	// +optional
	Requester *Requester `json:"requester,omitempty"`
}

// Requester identifies a Kubernetes user, as the API server authenticated them.
type Requester struct {
	// Username as authenticated (e.g. `alice`, `system:serviceaccount:ci:deployer`).
	Username string `json:"username"`
	// UID of the user, when the authenticator provides one.
	// +optional
	UID string `json:"uid,omitempty"`
	// Groups the user belongs to.
	// +optional
	// +listType=atomic
	Groups []string `json:"groups,omitempty"`
}

// CommitRequestStatus reports what became of the request. Its outcome is always here, with
// a reason: a message is never silently lost.
type CommitRequestStatus struct {
	// ObservedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Committed (True once the commit carrying the message was pushed; False
	// with a reason when it never will be), and kstatus' Ready (True, reason Committed,
	// once pushed), Reconciling while waiting, Stalled with the final reason.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// SHA of the pushed commit carrying the message.
	// +optional
	SHA string `json:"sha,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gcr,categories=gitops-reverser
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Requester",type=string,JSONPath=`.spec.requester.username`
// +kubebuilder:printcolumn:name="Committed",type=string,JSONPath=`.status.conditions[?(@.type=="Committed")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Committed")].reason`
// +kubebuilder:printcolumn:name="SHA",type=string,JSONPath=`.status.sha`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// CommitRequest is "commit my pending changes on this GitTarget now, with this message".
// It attaches to the requester's open commit window on the target, or waits for their next
// change up to spec.timeout.
type CommitRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CommitRequestSpec   `json:"spec"`
	Status CommitRequestStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// CommitRequestList is a list of CommitRequests.
type CommitRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CommitRequest `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CommitRequest{}, &CommitRequestList{})
}
