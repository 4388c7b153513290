// Package watcher turns WatchRules into shared informers and informer events into Changes
// for the Git writer: one informer per resource, fanned out to every GitTarget claiming it.
package watcher

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

// Resource is a resolved, watchable resource.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// Claim says that one GitTarget wants the objects of one resource that match its selectors.
type Claim struct {
	Target   types.NamespacedName
	Resource Resource
	// Namespace limits a namespaced claim to one namespace (WatchRule); "" means any
	// namespace chosen by NamespaceSelector (ClusterWatchRule), or a cluster-scoped resource.
	Namespace         string
	NamespaceSelector labels.Selector
	ObjectSelector    labels.Selector
	Create            bool
	Update            bool
	Delete            bool
}

// Resolve matches rules against the server's discovery data the way RBAC reads a rule:
// every listed group with every listed resource, where a combination the server does not
// have is simply not there (apiGroups ["", "apps"] with configmaps and deployments means
// configmaps and deployments.apps). A named resource that exists in none of the groups, or
// cannot be listed and watched, is a problem; so is a named cluster-scoped resource in a
// namespaced rule. "*" takes every watchable resource of the groups that the rule may
// capture, except the cluster's runtime state (see RuntimeState). Problems name each
// resource; the resources that do resolve are returned either way.
func Resolve(rule v1alpha1.ResourceRule, lists []*metav1.APIResourceList, scope Scope) ([]Resource, []Problem) {
	var out []Resource
	var problems []Problem
	seen := map[schema.GroupVersionResource]bool{}
	for _, name := range rule.Resources {
		found := false
		for _, group := range rule.APIGroups {
			for _, list := range lists {
				gv, err := schema.ParseGroupVersion(list.GroupVersion)
				if err != nil || (group != "*" && gv.Group != group) {
					continue
				}
				for _, r := range list.APIResources {
					if strings.Contains(r.Name, "/") || (name != "*" && r.Name != name) {
						continue
					}
					if name == "*" && (!watchable(r) || !scope.takes(r) || RuntimeState(gv.Group, r.Name)) {
						continue
					}
					found = true
					if problem := unwatchable(gv.Group, r, scope); problem != "" {
						problems = append(problems, Problem{Name: name, Groups: rule.APIGroups, Message: problem})
						continue
					}
					gvr := gv.WithResource(r.Name)
					if seen[gvr] || seenGroupResource(seen, gvr) {
						continue
					}
					seen[gvr] = true
					out = append(out, Resource{GVR: gvr, Kind: r.Kind, Namespaced: r.Namespaced})
				}
			}
		}
		if !found && name != "*" {
			problems = append(problems, Problem{Name: name, Groups: rule.APIGroups, Missing: true, Message: notFound(rule.APIGroups, name)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GVR.String() < out[j].GVR.String() })
	return out, problems
}

// Problem is why a resource a rule names is not captured. Missing tells a resource that
// discovery lists in none of the rule's groups (which an API failing discovery may only
// hide) from one listed where the rule cannot capture it.
type Problem struct {
	// Name is the resource as the rule names it, in any of the rule's Groups.
	Name    string
	Groups  []string
	Missing bool
	// Message names the resource and what to do, for the rule's status.
	Message string
}

// InGroup says whether the problem is about a resource of group: one of the rule's groups,
// or any group for "*".
func (p Problem) InGroup(group string) bool {
	return slices.Contains(p.Groups, "*") || slices.Contains(p.Groups, group)
}

// Scope is which resources a rule may capture.
type Scope struct {
	// Namespaced resources: a WatchRule, or a ClusterWatchRule rule with a namespaceSelector.
	Namespaced bool
	// ClusterScoped resources: a ClusterWatchRule.
	ClusterScoped bool
}

// Scopes of the rules.
var (
	// WatchRuleScope is a WatchRule's: the namespaced resources of its namespace.
	WatchRuleScope = Scope{Namespaced: true}
)

func (s Scope) takes(r metav1.APIResource) bool {
	if r.Namespaced {
		return s.Namespaced
	}
	return s.ClusterScoped
}

// unwatchable says why a named resource cannot be captured by the rule ("" when it can).
func unwatchable(group string, r metav1.APIResource, scope Scope) string {
	switch {
	case !watchable(r):
		return fmt.Sprintf("%s is not watchable (needs list and watch)", groupResource(group, r.Name))
	case !r.Namespaced && !scope.ClusterScoped:
		return fmt.Sprintf("%s is cluster-scoped: use a ClusterWatchRule", groupResource(group, r.Name))
	case r.Namespaced && !scope.Namespaced:
		return fmt.Sprintf("%s is namespaced: set namespaceSelector ({} for all namespaces)", groupResource(group, r.Name))
	}
	return ""
}

// notFoundHint follows a resource the server does not have, naming the usual causes: a
// singular or Kind-style name, the wrong group, a CRD not installed yet.
const notFoundHint = " (use the plural `kubectl api-resources` lists, e.g. configmaps, in its API group; or install its CRD)"

// notFound names a resource that none of the rule's groups has, and what to check.
func notFound(groups []string, name string) string {
	if len(groups) == 1 {
		return fmt.Sprintf("%s not found on the server", groupResource(groups[0], name)) + notFoundHint
	}
	quoted := make([]string, 0, len(groups))
	for _, g := range groups {
		quoted = append(quoted, fmt.Sprintf("%q", g))
	}
	return fmt.Sprintf("%s not found on the server in any of the groups %s", name, strings.Join(quoted, ", ")) + notFoundHint
}

// RuntimeState reports whether a resource holds what the cluster records about itself
// rather than what people declare: Events, Leases, LeaseCandidates, Endpoints and
// EndpointSlices change many times a minute; Nodes, CSINodes, VolumeAttachments, CSIStorageCapacities, ResourceSlices
// and IPAddresses are registered or allocated by the kubelet, drivers and the API server;
// CertificateSigningRequests and cert-manager's CertificateRequests, Orders and Challenges
// are one-off steps of an issuance. None is ever deployed from Git. "*" leaves them out
// (as Argo CD excludes most of them by default); a rule that names one still captures it.
func RuntimeState(group, resource string) bool {
	switch groupResource(group, resource) {
	case "events", "events.events.k8s.io", "leases.coordination.k8s.io", "leasecandidates.coordination.k8s.io",
		"endpoints", "endpointslices.discovery.k8s.io",
		"nodes", "csinodes.storage.k8s.io", "volumeattachments.storage.k8s.io", "csistoragecapacities.storage.k8s.io",
		"resourceslices.resource.k8s.io", "ipaddresses.networking.k8s.io",
		"certificatesigningrequests.certificates.k8s.io", "certificaterequests.cert-manager.io",
		"orders.acme.cert-manager.io", "challenges.acme.cert-manager.io":
		return true
	}
	return false
}

// seenGroupResource keeps one version per group/resource: discovery lists the preferred
// version first, and watching two versions of one resource would write each object twice.
func seenGroupResource(seen map[schema.GroupVersionResource]bool, gvr schema.GroupVersionResource) bool {
	for s := range seen {
		if s.GroupResource() == gvr.GroupResource() {
			return true
		}
	}
	return false
}

func watchable(r metav1.APIResource) bool {
	var list, watch bool
	for _, v := range r.Verbs {
		list = list || v == "list"
		watch = watch || v == "watch"
	}
	return list && watch
}

func groupResource(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// Operations decodes the operations of a rule; an empty list means all of them.
func Operations(ops []v1alpha1.Operation) (create, update, del bool) {
	if len(ops) == 0 {
		return true, true, true
	}
	for _, op := range ops {
		switch op {
		case v1alpha1.OperationAll:
			return true, true, true
		case v1alpha1.OperationCreate:
			create = true
		case v1alpha1.OperationUpdate:
			update = true
		case v1alpha1.OperationDelete:
			del = true
		}
	}
	return create, update, del
}

// Selector turns an optional label selector into a labels.Selector; nil selects everything.
func Selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// Matches reports whether an object with these labels, in a namespace with nsLabels, is
// claimed. nsLabels is consulted only for claims with a NamespaceSelector.
func (c Claim) Matches(namespace string, objLabels labels.Set, nsLabels func(string) labels.Set) bool {
	return c.CoversNamespace(namespace, nsLabels) && c.ObjectSelector.Matches(objLabels)
}

// CoversNamespace reports whether objects in namespace ("" for cluster-scoped objects) are
// within the claim's scope, whatever their labels.
func (c Claim) CoversNamespace(namespace string, nsLabels func(string) labels.Set) bool {
	if !c.Resource.Namespaced {
		return namespace == ""
	}
	if c.Namespace != "" {
		return c.Namespace == namespace
	}
	return namespace != "" && c.NamespaceSelector != nil && c.NamespaceSelector.Matches(nsLabels(namespace))
}

// couldHaveCovered reports whether the claim could have covered objects in namespace ns
// whatever ns's labels were: a claim of that namespace by name, or one selecting
// namespaces by label. It judges documents of a namespace that no longer exists.
func (c Claim) couldHaveCovered(ns string) bool {
	return c.Resource.Namespaced && (c.Namespace == ns || (c.Namespace == "" && c.NamespaceSelector != nil))
}

// key renders a claim canonically, for comparing claim sets.
func (c Claim) key() string {
	nsSel := "<none>"
	if c.NamespaceSelector != nil {
		nsSel = c.NamespaceSelector.String()
	}
	return fmt.Sprintf("%s|%s|%s|%s|%v|%s|%s|%t%t%t", c.Target, c.Resource.GVR, c.Resource.Kind, c.Namespace,
		c.Resource.Namespaced, nsSel, c.ObjectSelector.String(), c.Create, c.Update, c.Delete)
}

// sameClaims reports whether two claim lists select exactly the same objects the same way.
func sameClaims(a, b []Claim) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key() != b[i].key() {
			return false
		}
	}
	return true
}
