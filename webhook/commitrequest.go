package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
)

// RequesterPath is where the mutating webhook that stamps a CommitRequest's requester is
// served.
const RequesterPath = "/mutate/commitrequest"

// RequesterOf is the requester the API server authenticated for a request.
func RequesterOf(u authnv1.UserInfo) *v1alpha1.Requester {
	return &v1alpha1.Requester{Username: u.Username, UID: u.UID, Groups: slices.Clone(u.Groups)}
}

// StampRequester sets spec.requester of a new CommitRequest to whoever created it, replacing
// any value the client sent: only the API server says who a user is (cert-manager's
// CertificateRequest works the same way). The patch touches spec.requester alone: the object
// is never decoded and encoded again, which would rewrite other fields (spec.timeout "90s"
// as "1m30s", which the CRD's rules may then refuse) and drop unknown ones.
type StampRequester struct{}

// Handle implements admission.Handler.
func (StampRequester) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "CommitRequest" {
		return admission.Allowed("")
	}
	var shape struct {
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &shape); err != nil || shape.Spec == nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the CommitRequest: it needs a spec object"))
	}
	// "add" replaces a member that exists (RFC 6902).
	return admission.Patched("", jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/requester", Value: RequesterOf(req.UserInfo)})
}

// ValidateCommitRequest is the verdict on a new CommitRequest: its requester must be the
// authenticated user (the mutating webhook sets it; without it nobody's changes could be
// matched safely) and its GitTarget must exist. targetErr is nil when the target exists.
func ValidateCommitRequest(cr *v1alpha1.CommitRequest, user authnv1.UserInfo, targetErr error) error {
	name := types.NamespacedName{Namespace: cr.Namespace, Name: cr.Name}
	if r := cr.Spec.Requester; r == nil || r.Username != user.Username || r.UID != user.UID || !slices.Equal(r.Groups, user.Groups) {
		return fmt.Errorf("CommitRequest %s: spec.requester must be the user creating it; it is set by the mutating webhook "+
			"%q, which did not run — install the MutatingWebhookConfiguration and leave spec.requester empty", name, "requester.reverser.gitops.dev")
	}
	if targetErr != nil {
		return fmt.Errorf("CommitRequest %s: spec.targetRef: GitTarget %s/%s: %w", name, cr.Namespace, cr.Spec.TargetRef.Name, targetErr)
	}
	return nil
}

// validateCommitRequest decodes a CommitRequest creation and judges it.
func (o *Own) validateCommitRequest(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("") // spec is immutable (CEL); status is the operator's
	}
	var cr v1alpha1.CommitRequest
	if err := o.Decoder.Decode(req, &cr); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if cr.Namespace == "" {
		cr.Namespace = req.Namespace
	}
	var t v1alpha1.GitTarget
	err := o.Client.Get(ctx, client.ObjectKey{Namespace: cr.Namespace, Name: cr.Spec.TargetRef.Name}, &t)
	switch {
	case apierrors.IsNotFound(err):
		err = fmt.Errorf("not found; create the GitTarget first or fix spec.targetRef")
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if err := ValidateCommitRequest(&cr, req.UserInfo, err); err != nil {
		return admission.Denied(err.Error())
	}
	return admission.Allowed("")
}

// RequesterWebhookName is the MutatingWebhookConfiguration entry that stamps requesters.
const RequesterWebhookName = "requester.reverser.gitops.dev"

// RequesterWebhook is that entry for a client config: CommitRequest creations only, failing
// closed (a request without a trustworthy requester is refused by the validating webhook
// anyway), reinvoked never, since nothing else should touch spec.requester.
func RequesterWebhook(cc admissionregv1.WebhookClientConfig) admissionregv1.MutatingWebhook {
	return admissionregv1.MutatingWebhook{
		Name:                    RequesterWebhookName,
		ClientConfig:            cc,
		SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		FailurePolicy:           ptr.To(admissionregv1.Fail),
		TimeoutSeconds:          ptr.To(int32(5)),
		Rules: []admissionregv1.RuleWithOperations{{
			Operations: []admissionregv1.OperationType{admissionregv1.Create},
			Rule: admissionregv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{v1alpha1.GroupVersion.Version},
				Resources: []string{"commitrequests"}},
		}},
	}
}

// OwnMatchConditions are the match conditions of the validating entry for the operator's
// own resources: an update that leaves the spec as it was (labels, annotations, a
// finalizer the garbage collector removes) is not sent, as the handler would allow it
// (specUnchanged), so an outage under the entry's failurePolicy Fail never holds up a
// deletion or an uninstall.
func OwnMatchConditions() []admissionregv1.MatchCondition {
	return []admissionregv1.MatchCondition{{Name: "spec-changed",
		Expression: "request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec"}}
}

// OwnRules are the rules of the validating entry for the operator's own resources.
func OwnRules() []admissionregv1.RuleWithOperations {
	rule := func(resource string, ops ...admissionregv1.OperationType) admissionregv1.RuleWithOperations {
		return admissionregv1.RuleWithOperations{Operations: ops, Rule: admissionregv1.Rule{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{v1alpha1.GroupVersion.Version}, Resources: []string{resource}}}
	}
	return []admissionregv1.RuleWithOperations{
		rule("gittargets", admissionregv1.Create, admissionregv1.Update),
		rule("gitproviders", admissionregv1.Create, admissionregv1.Update),
		rule("commitrequests", admissionregv1.Create),
		rule("watchrules", admissionregv1.Create, admissionregv1.Update),
		rule("clusterwatchrules", admissionregv1.Create, admissionregv1.Update),
	}
}
