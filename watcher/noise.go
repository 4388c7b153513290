package watcher

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Noise says which objects are not anyone's intent and are skipped by default: they are
// written by the cluster itself, and mirroring them (or judging them at admission) would
// fill Git with churn and could block the cluster's own controllers.
type Noise struct {
	// CaptureKubeRootCA captures the kube-root-ca.crt ConfigMap of every namespace.
	CaptureKubeRootCA bool
	// CaptureServiceAccountTokens captures Secrets of type kubernetes.io/service-account-token.
	CaptureServiceAccountTokens bool
	// CaptureOwned captures objects with a controller ownerReference (ReplicaSets of
	// Deployments, Jobs of CronJobs, Pods of anything…).
	CaptureOwned bool
}

// ObjectFacts are the few facts the noise decision needs, so admission can supply them from
// a partial decode.
type ObjectFacts struct {
	Resource   schema.GroupResource
	Name       string
	SecretType string
	Owners     []metav1.OwnerReference
}

// Skip decides whether an object is noise; it returns the reason for logs.
func (n Noise) Skip(f ObjectFacts) (bool, string) {
	core := f.Resource.Group == ""
	switch {
	case !n.CaptureKubeRootCA && core && f.Resource.Resource == "configmaps" && f.Name == "kube-root-ca.crt":
		return true, "kube-root-ca.crt is published by the cluster in every namespace"
	case !n.CaptureServiceAccountTokens && core && f.Resource.Resource == "secrets" && f.SecretType == "kubernetes.io/service-account-token":
		return true, "service-account token Secrets are minted by the cluster"
	case !n.CaptureOwned && hasController(f.Owners):
		return true, "objects with a controller ownerReference are managed by their owner"
	}
	return false, ""
}

// SkipObject is Skip for an object from the watch.
func (n Noise) SkipObject(gr schema.GroupResource, u *unstructured.Unstructured) bool {
	secretType, _, _ := unstructured.NestedString(u.Object, "type")
	skip, _ := n.Skip(ObjectFacts{Resource: gr, Name: u.GetName(), SecretType: secretType, Owners: u.GetOwnerReferences()})
	return skip
}

func hasController(owners []metav1.OwnerReference) bool {
	for _, o := range owners {
		if o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
