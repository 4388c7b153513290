package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/watcher"
)

// The operator reads every watched resource with its own, broad permissions and copies it
// to a repository the rule's author chose. Without a check, whoever may create a WatchRule
// could read through the operator what RBAC denies them. So a rule's author must be allowed
// to list what it captures, and a GitTarget's author to read the Secrets its encryption keys
// would open — the same model as Flux's impersonation, decided at admission.

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// ReadAccess is one permission the author of a rule or target must hold.
type ReadAccess struct {
	Verb      string
	Group     string
	Resource  string
	Namespace string // "" = every namespace
	Name      string // "" = every object
}

// String names the permission as a denial quotes it, in kubectl's words ("list
// configmaps in namespace team-a"), so the author knows what to ask for.
func (a ReadAccess) String() string {
	gr := a.Resource
	if a.Group != "" {
		gr += "." + a.Group
	}
	if a.Name != "" {
		gr += "/" + a.Name
	}
	where := "in every namespace"
	if a.Namespace != "" {
		where = "in namespace " + a.Namespace
	}
	return fmt.Sprintf("%s %s %s", a.Verb, gr, where)
}

// RuleReadAccess lists what the author of a WatchRule (namespace set) or ClusterWatchRule
// (namespace "") must be allowed to list: every group × resource of every rule, "*"
// included as such (the author must then be allowed to list everything). Pure.
func RuleReadAccess(namespace string, rules []v1alpha1.ResourceRule) []ReadAccess {
	seen := map[ReadAccess]bool{}
	var out []ReadAccess
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				a := ReadAccess{Verb: "list", Group: g, Resource: res, Namespace: namespace}
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
		}
	}
	return out
}

// TargetReadAccess lists what the author of a GitTarget must be allowed to do: with
// spec.encryption set, get Secrets in its namespace (the recipients they choose can open
// every Secret the target writes); with generateWhenMissing, also create and update the
// Secret it names, into which the operator writes an identity (and a label that keeps it
// out of Git). Pure.
func TargetReadAccess(t *v1alpha1.GitTarget) []ReadAccess {
	if t.Spec.Encryption == nil {
		return nil
	}
	need := []ReadAccess{{Verb: "get", Resource: "secrets", Namespace: t.Namespace}}
	if age := t.Spec.Encryption.Age; age != nil && age.GenerateWhenMissing && age.SecretRef != nil {
		// create without a name: a create request carries none, so RBAC never grants one by name.
		need = append(need, ReadAccess{Verb: "create", Resource: "secrets", Namespace: t.Namespace},
			ReadAccess{Verb: "update", Resource: "secrets", Namespace: t.Namespace, Name: age.SecretRef.Name})
	}
	return need
}

// ProviderReadAccess lists what the author of a GitProvider must be allowed to do: get the
// Secret its spec.secretRef names, whose credentials the operator sends to spec.url (a
// provider's author chooses that server). Pure.
func ProviderReadAccess(p *v1alpha1.GitProvider) []ReadAccess {
	if p.Spec.SecretRef == nil || p.Spec.SecretRef.Name == "" {
		return nil
	}
	return []ReadAccess{{Verb: "get", Resource: "secrets", Namespace: p.Namespace, Name: p.Spec.SecretRef.Name}}
}

// RouteAccess lists what the author of a ClusterWatchRule must be allowed to do besides
// reading what it selects: update the GitTarget it names, whatever namespace that is in.
// The objects are committed through that target's repository, which whoever may edit the
// target chooses, with the recipients of its Secrets; without the check anyone who may
// create a ClusterWatchRule could write into any team's repository. A WatchRule names a
// target of its own namespace, where its author works already, so it is not asked. Pure.
func RouteAccess(target v1alpha1.NamespacedObjectReference) []ReadAccess {
	return []ReadAccess{{Verb: "update", Group: v1alpha1.GroupVersion.Group, Resource: "gittargets", Namespace: target.Namespace, Name: target.Name}}
}

// Authorizer asks the API server whether a user may do something.
type Authorizer interface {
	Allowed(ctx context.Context, user authnv1.UserInfo, a ReadAccess) (bool, error)
}

// SubjectAccessReviewer is the Authorizer backed by SubjectAccessReviews.
type SubjectAccessReviewer struct{ Client client.Client }

// Allowed implements Authorizer.
func (s SubjectAccessReviewer) Allowed(ctx context.Context, user authnv1.UserInfo, a ReadAccess) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: a.Verb, Group: a.Group, Resource: a.Resource, Namespace: a.Namespace, Name: a.Name},
	}}
	if err := s.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking the API server whether %s may %s: %w", user.Username, a, err)
	}
	return sar.Status.Allowed, nil
}

// Why the author of a rule, a GitTarget or a GitProvider must hold what requireAccess checks,
// as its denial says it.
const (
	whyRule = "the operator copies what this selects to Git, so its author must be allowed to read it " +
		"(ask for that permission, or narrow the rule)"
	whyTarget = "the recipients it names can open every Secret the target writes, and generateWhenMissing writes " +
		"into its Secret, so its author must be allowed to read Secrets there, and to write that one (ask for that " +
		"permission, or remove spec.encryption or generateWhenMissing)"
	whyRouted = "whom the GitTarget encrypts for can open them (or, no longer encrypted, they would be written in " +
		"plaintext), so whoever changes its encryption must be allowed to read them there (ask for that permission, " +
		"keep encrypting them, or have those rules route elsewhere)"
	whyRoute = "the operator commits what it selects through that GitTarget's repository, whose owners choose where it " +
		"goes and who can open its Secrets, so its author must be allowed to update that GitTarget (ask for that " +
		"permission, or name a GitTarget you may update)"
	whyProvider = "the operator sends that Secret's credentials to spec.url, so its author must be allowed to read it " +
		"(ask for that permission, or name a Secret you may read)"
)

// requireAccess denies the request unless its user holds every access, saying why.
func (o *Own) requireAccess(ctx context.Context, req admission.Request, what, why string, need []ReadAccess) admission.Response {
	if o.Authorizer == nil || len(need) == 0 {
		return admission.Allowed("")
	}
	var missing []string
	for _, a := range need {
		ok, err := o.Authorizer.Allowed(ctx, req.UserInfo, a)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if !ok {
			missing = append(missing, a.String())
		}
	}
	if len(missing) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("%s: %s may not %s; %s", what, req.UserInfo.Username, strings.Join(missing, ", "), why))
}

// validateRule checks a WatchRule or ClusterWatchRule's author against what it captures.
func (o *Own) validateRule(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	switch req.Kind.Kind {
	case "WatchRule":
		var r v1alpha1.WatchRule
		if err := o.Decoder.Decode(req, &r); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		what := fmt.Sprintf("WatchRule %s/%s", req.Namespace, r.Name)
		if err := SelectorsProblem(what, r.Spec.Rules, nil); err != nil {
			return admission.Denied(err.Error())
		}
		resp := o.requireAccess(ctx, req, what, whyRule, RuleReadAccess(req.Namespace, r.Spec.Rules))
		return o.warnSensitive(ctx, resp, what, r.Spec.Rules, types.NamespacedName{Namespace: req.Namespace, Name: r.Spec.TargetRef.Name})
	default:
		var r v1alpha1.ClusterWatchRule
		if err := o.Decoder.Decode(req, &r); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		rules := make([]v1alpha1.ResourceRule, 0, len(r.Spec.Rules))
		namespaces := make([]*metav1.LabelSelector, 0, len(r.Spec.Rules))
		for _, cr := range r.Spec.Rules {
			rules = append(rules, cr.ResourceRule)
			namespaces = append(namespaces, cr.NamespaceSelector)
		}
		what := "ClusterWatchRule " + r.Name
		if err := SelectorsProblem(what, rules, namespaces); err != nil {
			return admission.Denied(err.Error())
		}
		resp := o.requireAccess(ctx, req, what, whyRule, RuleReadAccess("", rules))
		if resp.Allowed {
			resp = o.requireAccess(ctx, req, what, whyRoute, RouteAccess(r.Spec.TargetRef))
		}
		return o.warnSensitive(ctx, resp, what, rules, types.NamespacedName{Namespace: r.Spec.TargetRef.Namespace, Name: r.Spec.TargetRef.Name})
	}
}

// warnSensitive adds to an allowed rule the warning SensitiveRouteWarning gives for its
// target, read from the cache (none when it cannot be read: the warning is a courtesy).
func (o *Own) warnSensitive(ctx context.Context, resp admission.Response, what string, rules []v1alpha1.ResourceRule, target types.NamespacedName) admission.Response {
	if !resp.Allowed {
		return resp
	}
	var t v1alpha1.GitTarget
	if err := o.Client.Get(ctx, target, &t); err != nil {
		return resp
	}
	if w := SensitiveRouteWarning(what, rules, &t, o.SensitiveResources); w != "" {
		resp.Warnings = append(resp.Warnings, w)
	}
	return resp
}

// SensitiveRouteWarning warns that a rule names sensitive resources (core secrets, the
// operator's --sensitive-resources listed in sensitive, the target's
// spec.encryption.sensitiveResources) for a GitTarget that cannot encrypt now: every such
// object would be denied at admission and refused by the writer, none of them judged when
// the rule is made. "" otherwise. Only resources the rule names count (resources "*" is
// not guessed at); under apiGroups "*" a name counts for every sensitive resource of that
// name, whatever its group. Pure.
func SensitiveRouteWarning(what string, rules []v1alpha1.ResourceRule, t *v1alpha1.GitTarget, sensitive []schema.GroupResource) string {
	state := "which cannot encrypt (it has no spec.encryption)"
	if t.Spec.Encryption != nil {
		c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionEncryptionReady)
		switch {
		case c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == t.Generation:
			return ""
		case c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == t.Generation:
			state = "which cannot encrypt (EncryptionReady is False: " + c.Message + ")"
		default:
			state = "whose encryption has not been checked for its current spec yet (a new or edited GitTarget is checked within moments)"
		}
	}
	known := sensitiveFor(t, sensitive)
	var named []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if res == "*" {
					continue
				}
				for _, gr := range known {
					taken := gr.Resource == res && (g == "*" || g == gr.Group)
					if taken && !slices.Contains(named, gr.String()) {
						named = append(named, gr.String())
					}
				}
			}
		}
	}
	if len(named) == 0 {
		return ""
	}
	return fmt.Sprintf("%s routes %s to GitTarget %s/%s, %s: until its EncryptionReady condition is True, each such object is denied "+
		"at admission and refused by the writer, never written in plaintext", what, strings.Join(named, ", "), t.Namespace, t.Name, state)
}

// sensitiveFor lists what a target writes only encrypted: core Secrets, the operator's
// --sensitive-resources (sensitive) and the target's spec.encryption.sensitiveResources.
func sensitiveFor(t *v1alpha1.GitTarget, sensitive []schema.GroupResource) []schema.GroupResource {
	known := append([]schema.GroupResource{{Resource: "secrets"}}, sensitive...)
	if t.Spec.Encryption != nil {
		for _, gr := range t.Spec.Encryption.SensitiveResources {
			known = append(known, schema.GroupResource{Group: gr.Group, Resource: gr.Resource})
		}
	}
	return known
}

// RoutedSensitive lists the sensitive resources whose reading a change of a GitTarget's
// encryption hands over (old is the stored target, nil on create): all of sensitiveFor when
// it widens whom the target encrypts for (widensRecipients), and those it stops encrypting
// (dropped from spec.encryption.sensitiveResources, or spec.encryption removed), which
// would then be written in plaintext. Narrowing (a leaked recipient removed) asks nothing.
// Core Secrets are never dropped: a target without encryption refuses them. Pure.
func RoutedSensitive(t, old *v1alpha1.GitTarget, sensitive []schema.GroupResource) []schema.GroupResource {
	now := sensitiveFor(t, sensitive)
	var out []schema.GroupResource
	if widensRecipients(ageOf(old), ageOf(t)) {
		out = append(out, now...)
	}
	if old != nil {
		for _, gr := range sensitiveFor(old, sensitive) {
			if !slices.Contains(now, gr) && !slices.Contains(out, gr) {
				out = append(out, gr)
			}
		}
	}
	return out
}

// ageOf is a target's spec.encryption.age, nil for no target or none.
func ageOf(t *v1alpha1.GitTarget) *v1alpha1.AgeEncryption {
	if t == nil || t.Spec.Encryption == nil {
		return nil
	}
	return t.Spec.Encryption.Age
}

// widensRecipients says whether now lets someone open what old did not: a recipient old
// lacked, a Secret of identities newly named (whoever reads or writes it holds or adds
// identities), or generateWhenMissing switched on (the operator writes an identity there).
// Pure.
func widensRecipients(old, now *v1alpha1.AgeEncryption) bool {
	switch {
	case now == nil:
		return false
	case old == nil:
		return true
	}
	for _, r := range now.Recipients {
		if !slices.Contains(old.Recipients, r) {
			return true
		}
	}
	if now.SecretRef != nil && (old.SecretRef == nil || old.SecretRef.Name != now.SecretRef.Name) {
		return true
	}
	return now.GenerateWhenMissing && !old.GenerateWhenMissing
}

// RoutedAccess is one permission RoutedReadAccess asks for, with the rules that make it
// needed, named for the denial ("ClusterWatchRule backup", "WatchRule team-a/tokens").
type RoutedAccess struct {
	ReadAccess
	Rules []string
}

// RoutedReadAccess lists what the author of a change of a GitTarget's encryption must be
// allowed to read: get on each resource of grs (RoutedSensitive) that a ClusterWatchRule
// routes into the target, in every namespace, or a WatchRule of its namespace, there. The
// recipients they choose can open what a ClusterWatchRule brings from any namespace it
// selects, now or after a namespace is relabelled, so the check does not follow the rule's
// namespaceSelector. "*" in a rule's apiGroups or resources counts as naming every resource
// of grs it could match. Pure.
func RoutedReadAccess(t *v1alpha1.GitTarget, grs []schema.GroupResource, cluster []v1alpha1.ClusterWatchRule, local []v1alpha1.WatchRule) []RoutedAccess {
	var out []RoutedAccess
	add := func(namespace, rule string, rules []v1alpha1.ResourceRule) {
		for _, r := range rules {
			for _, gr := range grs {
				named := slices.ContainsFunc(r.APIGroups, func(g string) bool { return g == "*" || g == gr.Group }) &&
					slices.ContainsFunc(r.Resources, func(res string) bool { return res == "*" || res == gr.Resource })
				if !named {
					continue
				}
				a := ReadAccess{Verb: "get", Group: gr.Group, Resource: gr.Resource, Namespace: namespace}
				i := slices.IndexFunc(out, func(ra RoutedAccess) bool { return ra.ReadAccess == a })
				if i < 0 {
					out = append(out, RoutedAccess{ReadAccess: a})
					i = len(out) - 1
				}
				if !slices.Contains(out[i].Rules, rule) {
					out[i].Rules = append(out[i].Rules, rule)
				}
			}
		}
	}
	for _, cr := range cluster {
		if cr.Spec.TargetRef.Namespace == t.Namespace && cr.Spec.TargetRef.Name == t.Name {
			rules := make([]v1alpha1.ResourceRule, len(cr.Spec.Rules))
			for i, r := range cr.Spec.Rules {
				rules[i] = r.ResourceRule
			}
			add("", "ClusterWatchRule "+cr.Name, rules)
		}
	}
	for _, wr := range local {
		if wr.Namespace == t.Namespace && wr.Spec.TargetRef.Name == t.Name {
			add(t.Namespace, "WatchRule "+wr.Namespace+"/"+wr.Name, wr.Spec.Rules)
		}
	}
	return out
}

// SelectorsProblem says which label selector of a rule cannot be used, and why (a typo such
// as operator "in", an invalid label value), or nil: caught at admission, not only once the
// rule is stored and its controller marks it Stalled. namespaceSelectors, by rule index, are
// a ClusterWatchRule's. Pure.
func SelectorsProblem(what string, rules []v1alpha1.ResourceRule, namespaceSelectors []*metav1.LabelSelector) error {
	const fix = "operators are In, NotIn, Exists and DoesNotExist, and keys and values must be valid label keys and values"
	for i, r := range rules {
		if _, err := watcher.Selector(r.ObjectSelector); err != nil {
			return fmt.Errorf("%s: spec.rules[%d].objectSelector: %v (%s)", what, i, err, fix)
		}
		if i < len(namespaceSelectors) {
			if _, err := watcher.Selector(namespaceSelectors[i]); err != nil {
				return fmt.Errorf("%s: spec.rules[%d].namespaceSelector: %v (%s)", what, i, err, fix)
			}
		}
	}
	return nil
}
