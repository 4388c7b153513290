package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterResourceRule selects cluster-scoped resources, or namespaced resources in the
// namespaces chosen by NamespaceSelector.
type ClusterResourceRule struct {
	ResourceRule `json:",inline"`
	// NamespaceSelector chooses namespaces (by their labels) whose objects of namespaced
	// resources are captured; `{}` selects every namespace. Required when the rule names a
	// namespaced resource; ignored for cluster-scoped ones.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// NamespacedObjectReference names an object in a given namespace.
type NamespacedObjectReference struct {
	// Namespace of the referent.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Name of the referent.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ClusterWatchRuleSpec captures cluster-scoped objects, or namespaced ones across
// namespaces, into one GitTarget.
type ClusterWatchRuleSpec struct {
	// TargetRef names the GitTarget that receives the objects.
	TargetRef NamespacedObjectReference `json:"targetRef"`
	// Rules select the resources to capture.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Rules []ClusterResourceRule `json:"rules"`
}

// ClusterWatchRule captures cluster-scoped objects (and namespaced ones across selected
// namespaces) into a GitTarget.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cwr,categories=gitops-reverser
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Target Namespace",type=string,JSONPath=`.spec.targetRef.namespace`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterWatchRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterWatchRuleSpec `json:"spec"`
	Status WatchRuleStatus      `json:"status,omitempty"`
}

// ClusterWatchRuleList is a list of ClusterWatchRules.
// +kubebuilder:object:root=true
type ClusterWatchRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterWatchRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterWatchRule{}, &ClusterWatchRuleList{})
}
