package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Operation is a kind of change a rule captures.
// +kubebuilder:validation:Enum=CREATE;UPDATE;DELETE;"*"
type Operation string

// Operations a rule may capture.
const (
	OperationCreate Operation = "CREATE"
	OperationUpdate Operation = "UPDATE"
	OperationDelete Operation = "DELETE"
	OperationAll    Operation = "*"
)

// ResourceRule selects resources to capture.
type ResourceRule struct {
	// APIGroups of the resources; "" is the core group, "*" any group.
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	APIGroups []string `json:"apiGroups"`
	// Resources by plural name (e.g. `configmaps`, `deployments`); "*" means every
	// listable and watchable resource of the groups. Subresources are not allowed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^([*]|[a-z0-9.-]+)$')",message="resources must be plural resource names in lower case, e.g. deployments rather than Deployment (the NAME column of kubectl api-resources), or *; subresources such as deployments/scale are not watched"
	// +listType=set
	Resources []string `json:"resources"`
	// ObjectSelector captures only objects whose labels match. An object that stops
	// matching leaves Git like a deleted one.
	// +optional
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	// Operations to mirror: CREATE, UPDATE, DELETE or "*" (default). A rule without DELETE
	// keeps files of deleted objects in Git.
	// +kubebuilder:default={"*"}
	// +listType=set
	// +optional
	Operations []Operation `json:"operations,omitempty"`
}

// WatchRuleSpec captures objects of its own namespace into a GitTarget of that namespace.
type WatchRuleSpec struct {
	// TargetRef names the GitTarget (same namespace) that receives the objects.
	TargetRef LocalObjectReference `json:"targetRef"`
	// Rules select the namespaced resources to capture.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Rules []ResourceRule `json:"rules"`
}

// WatchRuleStatus reports which resources the rule resolved to.
type WatchRuleStatus struct {
	// ObservedGeneration is the last generation a reconcile reached a verdict on; one cut
	// short by a passing error leaves it behind (its conditions may already name the new one).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling, Stalled (kstatus) and ResourcesResolved.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Resources lists the resolved resources as `apiVersion/resource`: `v1/configmaps`,
	// `apps/v1/deployments`.
	// +optional
	Resources []string `json:"resources,omitempty"`
}

// WatchRule captures objects of its namespace into a GitTarget in the same namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wr,categories=gitops-reverser
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WatchRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WatchRuleSpec   `json:"spec"`
	Status WatchRuleStatus `json:"status,omitempty"`
}

// WatchRuleList is a list of WatchRules.
// +kubebuilder:object:root=true
type WatchRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WatchRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WatchRule{}, &WatchRuleList{})
}
