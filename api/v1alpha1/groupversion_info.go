// Package v1alpha1 holds the GitOps Reverser API: where cluster state is written to Git
// (GitProvider, GitTarget) and what is captured (WatchRule, ClusterWatchRule).
// +kubebuilder:object:generate=true
// +groupName=reverser.gitops.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion names the API so clients and the scheme agree on it.
	GroupVersion = schema.GroupVersion{Group: "reverser.gitops.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme lets the manager and tests decode this API.
	AddToScheme = SchemeBuilder.AddToScheme
)
