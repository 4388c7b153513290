package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// OwnPath is where the webhook for the operator's own resources is served.
const OwnPath = "/validate/reverser"

// ValidateTarget is the cross-object verdict on a GitTarget: its branch must be allowed
// by its provider (when the provider exists) and its folder must not overlap another
// target's on the same repository and branch. While the provider is missing (applied after
// its targets, or deleted), the repository is told apart by the provider's name (places
// from TargetPlace): two targets of one missing provider must not overlap either. The error
// message says what to change.
func ValidateTarget(t *v1alpha1.GitTarget, provider *v1alpha1.GitProvider, others []controller.Place) error {
	me := controller.TargetPlace(t, provider)
	repository := fmt.Sprintf("repository of GitProvider %s/%s (not created yet)", t.Namespace, t.Spec.ProviderRef.Name)
	if provider != nil {
		if !controller.BranchAllowed(provider, t.Spec.Branch) {
			malformed := ""
			if err := controller.AllowedBranchesProblem(provider.Spec.AllowedBranches); err != nil {
				malformed = fmt.Sprintf("; %v", err)
			}
			return fmt.Errorf("GitTarget %s/%s: branch %q is not allowed by GitProvider %s/%s (allowedBranches %v%s): "+
				"add a matching pattern to the provider's spec.allowedBranches, or choose an allowed branch",
				t.Namespace, t.Name, t.Spec.Branch, provider.Namespace, provider.Name, provider.Spec.AllowedBranches, malformed)
		}
		repository = "repository " + repo.Redact(provider.Spec.URL)
	}
	for _, o := range others {
		if o.Key != me.Key && controller.Overlaps(me, o) {
			return fmt.Errorf("GitTarget %s: folder %q overlaps folder %q of GitTarget %s on the same %s and branch %s; "+
				"choose a folder that is neither equal to nor inside nor around it", me.Key, me.Folder, o.Folder, o.Key, repository, me.Branch)
		}
	}
	return nil
}

// Own validates the operator's own resources.
type Own struct {
	Client  client.Reader
	Decoder admission.Decoder
	// Authorizer checks that a rule's or target's author may read what it exposes; nil
	// skips the check (tests of the other verdicts).
	Authorizer Authorizer
	// SensitiveResources is --sensitive-resources (core secrets always are sensitive): a
	// rule naming one for a target that cannot encrypt is warned about
	// (SensitiveRouteWarning). A list, not a predicate, so that a rule's apiGroups "*" can
	// be matched against every group.
	SensitiveResources []schema.GroupResource
}

// Handle implements admission.Handler.
func (o *Own) Handle(ctx context.Context, req admission.Request) admission.Response {
	if specUnchanged(req) {
		return admission.Allowed("")
	}
	switch req.Kind.Kind {
	case "CommitRequest":
		return o.validateCommitRequest(ctx, req)
	case "WatchRule", "ClusterWatchRule":
		return o.validateRule(ctx, req)
	case "GitProvider":
		return o.validateProvider(ctx, req)
	case "GitTarget":
		if req.Operation != admissionv1.Delete {
			return o.validateTarget(ctx, req)
		}
	}
	return admission.Allowed("")
}

// validateTarget judges a GitTarget's create or update: where it writes (targetPlace), and
// whether its author may read what its encryption and the rules routed to it expose.
func (o *Own) validateTarget(ctx context.Context, req admission.Request) admission.Response {
	var t v1alpha1.GitTarget
	if err := o.Decoder.Decode(req, &t); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if t.Namespace == "" {
		t.Namespace = req.Namespace
	}
	if err := newTemplatesProblem(req, &t); err != nil {
		return admission.Denied(err.Error())
	}
	warnings, refused := o.targetPlace(ctx, req, &t)
	if refused != nil {
		return *refused
	}
	need := TargetReadAccess(&t)
	old, ok := oldTarget(req)
	keeps := ok && reflect.DeepEqual(old.Spec.Encryption, t.Spec.Encryption)
	if keeps {
		need = need[:min(len(need), 1)] // an update that keeps spec.encryption is not asked to write its Secret again
	}
	what := fmt.Sprintf("GitTarget %s/%s: spec.encryption", t.Namespace, t.Name)
	resp := o.requireAccess(ctx, req, what, whyTarget, need)
	if resp.Allowed {
		var stored *v1alpha1.GitTarget
		if ok {
			stored = &old
		}
		resp = o.requireRoutedAccess(ctx, req, what, RoutedSensitive(&t, stored, o.SensitiveResources), &t, need)
	}
	resp.Warnings = append(resp.Warnings, warnings...)
	return resp
}

// targetPlace judges where t writes, against its GitProvider and the other targets in the
// cache: refused (a response) when it cannot write there, or with warnings for an update
// that keeps where it writes, which is not refused for a provider narrowed since, or an
// overlap that arose after its creation (a provider created or changed since): spec.branch
// is immutable, so it could never pass.
func (o *Own) targetPlace(ctx context.Context, req admission.Request, t *v1alpha1.GitTarget) (warnings []string, refused *admission.Response) {
	same := samePlace(req, t)
	provider, others, ctxErr := o.context(ctx, t)
	if ctxErr != nil && !same {
		resp := admission.Errored(http.StatusInternalServerError, ctxErr)
		return nil, &resp
	}
	if !same {
		if err := ValidateTarget(t, provider, others); err != nil {
			resp := admission.Denied(err.Error())
			return nil, &resp
		}
		return nil, nil
	}
	if ctxErr == nil { // a cache that cannot list does not fail a label's update
		if problem := ValidateTarget(t, provider, others); problem != nil {
			warnings = append(warnings, problem.Error()+" (this update is allowed: it keeps where the target writes)")
		}
	}
	return warnings, nil
}

// requireRoutedAccess asks RoutedReadAccess for grs of the author of a change of a target's
// encryption, from the rules in the cache, but for what was asked already (asked), and
// names in a denial the rules that route what they may not read.
func (o *Own) requireRoutedAccess(ctx context.Context, req admission.Request, what string, grs []schema.GroupResource, t *v1alpha1.GitTarget, asked []ReadAccess) admission.Response {
	if o.Authorizer == nil || len(grs) == 0 {
		return admission.Allowed("")
	}
	var cluster v1alpha1.ClusterWatchRuleList
	if err := o.Client.List(ctx, &cluster); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: listing ClusterWatchRules: %w", what, err))
	}
	var local v1alpha1.WatchRuleList
	if err := o.Client.List(ctx, &local, client.InNamespace(t.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: listing WatchRules: %w", what, err))
	}
	var missing, by []string
	for _, ra := range RoutedReadAccess(t, grs, cluster.Items, local.Items) {
		if slices.Contains(asked, ra.ReadAccess) {
			continue
		}
		ok, err := o.Authorizer.Allowed(ctx, req.UserInfo, ra.ReadAccess)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if !ok {
			missing = append(missing, ra.String())
			for _, r := range ra.Rules {
				if !slices.Contains(by, r) {
					by = append(by, r)
				}
			}
		}
	}
	if len(missing) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("%s: %s may not %s; %s route them into the GitTarget, and %s",
		what, req.UserInfo.Username, strings.Join(missing, ", "), strings.Join(by, ", "), whyRouted))
}

// validateProvider refuses new or changed allowedBranches patterns path.Match cannot read
// (they would match no branch, silently), and checks a GitProvider's author against the
// Secret it names: the operator sends its credentials to spec.url, which the author chose.
// An update that keeps the Secret (a label, allowedBranches, a re-apply by a GitOps tool) is
// not checked again: the URL is immutable.
func (o *Own) validateProvider(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var p v1alpha1.GitProvider
	if err := o.Decoder.Decode(req, &p); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if p.Namespace == "" {
		p.Namespace = req.Namespace
	}
	var old *v1alpha1.GitProvider
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old = &v1alpha1.GitProvider{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			old = nil
		}
	}
	// New patterns only: a stored one that does not read must not keep its provider from
	// being labelled, or its list from being edited otherwise.
	added := p.Spec.AllowedBranches
	if old != nil {
		added = slices.DeleteFunc(slices.Clone(added), func(g string) bool { return slices.Contains(old.Spec.AllowedBranches, g) })
	}
	if err := controller.AllowedBranchesProblem(added); err != nil {
		return admission.Denied(fmt.Sprintf("GitProvider %s/%s: %v", p.Namespace, p.Name, err))
	}
	if old != nil && reflect.DeepEqual(old.Spec.SecretRef, p.Spec.SecretRef) {
		return admission.Allowed("")
	}
	return o.requireAccess(ctx, req, fmt.Sprintf("GitProvider %s/%s: spec.secretRef", p.Namespace, p.Name), whyProvider, ProviderReadAccess(&p))
}

// newTemplatesProblem refuses new or changed commit message templates that do not parse or
// render (batch.ParseMessages), or that read a field no variable has, or a change's field
// off the group template's whole commit (batch.CheckMessageFields). A template an update
// keeps is not judged: one stored
// before the check keeps working as it did (falling back to the default message where it
// fails), and an edit of anything else, the other template included, is not refused for it.
func newTemplatesProblem(req admission.Request, t *v1alpha1.GitTarget) error {
	single, group := changedTemplates(req, t)
	if _, err := batch.ParseMessages(single, group); err != nil {
		return fmt.Errorf("GitTarget %s/%s: spec.commitMessage: %w", t.Namespace, t.Name, err)
	}
	if err := batch.CheckMessageFields(single, group); err != nil {
		return fmt.Errorf("GitTarget %s/%s: spec.commitMessage: %w", t.Namespace, t.Name, err)
	}
	return nil
}

// changedTemplates are t's commit message templates that req creates or changes; one an
// update keeps is "" (the default, which passes every check). Pure.
func changedTemplates(req admission.Request, t *v1alpha1.GitTarget) (single, group string) {
	single, group = t.Spec.CommitMessage.Single, t.Spec.CommitMessage.Group
	if old, ok := oldTarget(req); ok {
		if old.Spec.CommitMessage.Single == single {
			single = ""
		}
		if old.Spec.CommitMessage.Group == group {
			group = ""
		}
	}
	return single, group
}

// specUnchanged says whether req updates one of the operator's own objects without
// changing its spec: its labels, annotations or finalizers (a foreground deletion's garbage
// collector removing its own), or a GitOps tool's re-apply of the same. Such an update
// exposes nothing new and writes nowhere new, so it is not judged again: a check added
// since the object was stored (a template, a selector) must not keep it from being
// labelled or deleted. Pure.
func specUnchanged(req admission.Request) bool {
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 || len(req.Object.Raw) == 0 {
		return false
	}
	var old, cur struct {
		Spec any `json:"spec"`
	}
	if json.Unmarshal(req.OldObject.Raw, &old) != nil || json.Unmarshal(req.Object.Raw, &cur) != nil {
		return false
	}
	return old.Spec != nil && reflect.DeepEqual(old.Spec, cur.Spec)
}

// samePlace reports whether req updates a GitTarget without changing where it writes:
// branch, folder and provider as in the stored object.
func samePlace(req admission.Request, t *v1alpha1.GitTarget) bool {
	old, ok := oldTarget(req)
	return ok && old.Spec.Branch == t.Spec.Branch && old.Spec.Path == t.Spec.Path && old.Spec.ProviderRef == t.Spec.ProviderRef
}

// oldTarget is the stored GitTarget an update replaces; false for any other request.
func oldTarget(req admission.Request) (v1alpha1.GitTarget, bool) {
	var old v1alpha1.GitTarget
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return old, false
	}
	return old, json.Unmarshal(req.OldObject.Raw, &old) == nil
}

// context reads the target's provider and the places of every other target from the cache.
func (o *Own) context(ctx context.Context, t *v1alpha1.GitTarget) (*v1alpha1.GitProvider, []controller.Place, error) {
	providers, places, err := controller.ListPlaces(ctx, o.Client)
	if err != nil {
		return nil, nil, err
	}
	return providers[types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.ProviderRef.Name}], places, nil
}
