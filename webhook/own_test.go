package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

func TestValidateTarget(t *testing.T) {
	provider := &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "repo"},
		Spec: v1alpha1.GitProviderSpec{URL: "https://git.example.com/r.git", AllowedBranches: []string{"main"}}}
	target := func(name, branch, path string) *v1alpha1.GitTarget {
		return &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name},
			Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: branch, Path: path}}
	}
	existing := []controller.Place{{Key: types.NamespacedName{Namespace: "b", Name: "live"}, URL: "https://git.example.com/r", Branch: "main", Folder: "clusters/prod"}}

	assert.NoError(t, ValidateTarget(target("t", "main", "clusters/dev"), provider, existing))
	assert.NoError(t, ValidateTarget(target("t", "feature", "x"), nil, existing), "a missing provider is the reconciler's to report")
	notYet := []controller.Place{controller.TargetPlace(target("u", "main", "apps"), nil)}
	err := ValidateTarget(target("t", "main", "apps/x"), nil, notYet)
	assert.ErrorContains(t, err, `overlaps folder "apps" of GitTarget a/u on the same repository of GitProvider a/repo (not created yet)`,
		"kubectl apply -f dir/ applies both targets before their provider")
	err = ValidateTarget(target("t", "feature", "x"), provider, existing)
	assert.ErrorContains(t, err, `branch "feature" is not allowed by GitProvider a/repo`)
	err = ValidateTarget(target("t", "main", "clusters/prod/team"), provider, existing)
	assert.ErrorContains(t, err, `overlaps folder "clusters/prod" of GitTarget b/live`, "URLs are compared normalised")
	same := []controller.Place{{Key: types.NamespacedName{Namespace: "a", Name: "t"}, URL: "https://git.example.com/r", Branch: "main", Folder: "clusters/prod"}}
	assert.NoError(t, ValidateTarget(target("t", "main", "clusters/prod"), provider, same), "an update never overlaps itself")
}

func TestAGitTargetIsRefusedTheFolderOfAnotherProvidersTargetOnTheSameRepositoryDialledAsAnotherSSHUser(t *testing.T) {
	provider := func(name, url string) *v1alpha1.GitProvider {
		return &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}, Spec: v1alpha1.GitProviderSpec{URL: url}}
	}
	target := func(name, providerName string) *v1alpha1.GitTarget {
		return &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name},
			Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: providerName}, Branch: "main", Path: "live"}}
	}
	first := provider("key-1", "ssh://APKAEXAMPLE1@git-codecommit.example/v1/repos/live")
	second := provider("key-2", "ssh://APKAEXAMPLE2@git-codecommit.example/v1/repos/live")
	existing := []controller.Place{controller.TargetPlace(target("one", "key-1"), first)}
	err := ValidateTarget(target("two", "key-2"), second, existing)
	assert.ErrorContains(t, err, `overlaps folder "live" of GitTarget a/one`, "the ssh user picks the account, not the repository")
}

func TestAGitTargetUpdateThatKeepsWhereItWritesIsNotJudgedAgainstItsProvider(t *testing.T) {
	stored := v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "live"},
		Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: "main", Path: "live"}}
	raw, err := json.Marshal(stored)
	require.NoError(t, err)
	update := func(edit func(*v1alpha1.GitTarget)) (admission.Request, *v1alpha1.GitTarget) {
		t := stored.DeepCopy()
		edit(t)
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
			OldObject: runtime.RawExtension{Raw: raw}}}, t
	}
	req, labelled := update(func(t *v1alpha1.GitTarget) { t.Labels = map[string]string{"team": "a"} })
	assert.True(t, samePlace(req, labelled), "a label, a template, a GitOps tool's re-apply: a branch no longer allowed must not refuse it")
	req, moved := update(func(t *v1alpha1.GitTarget) { t.Spec.Path = "elsewhere" })
	assert.False(t, samePlace(req, moved), "a new folder is judged for overlaps")
	create := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}}
	assert.False(t, samePlace(create, &stored))
}

func TestNewTemplatesProblem(t *testing.T) {
	target := func(group string) *v1alpha1.GitTarget {
		return &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "live"},
			Spec: v1alpha1.GitTargetSpec{CommitMessage: v1alpha1.CommitMessage{Group: group}}}
	}
	raw := func(stored *v1alpha1.GitTarget) []byte {
		b, err := json.Marshal(stored)
		require.NoError(t, err)
		return b
	}
	const typo = `{{range .Changes}}{{if eq .Verb "Delete"}}- {{.Obj}}{{end}}{{end}}`
	cases := []struct {
		name string
		req  admission.Request
		t    *v1alpha1.GitTarget
		says string
	}{
		{name: "refuses a new target whose template reads a field no variable has, in a branch a sample never runs",
			req: ownRequest(admissionv1.Create, "GitTarget", "a", "live", nil, nil), t: target(typo), says: "GitTarget a/live: spec.commitMessage: invalid commit message template: group: .Obj is not a variable"},
		{name: "refuses an edit that brings such a template",
			req: ownRequest(admissionv1.Update, "GitTarget", "a", "live", nil, raw(target(""))), t: target(typo), says: ".Obj is not a variable"},
		{name: "takes an update that keeps a template stored before the check, which still falls back where it fails",
			req: ownRequest(admissionv1.Update, "GitTarget", "a", "live", nil, raw(target(typo))), t: target(typo)},
		{name: "takes an edit of the single template that keeps a group template stored before the check",
			req: ownRequest(admissionv1.Update, "GitTarget", "a", "live", nil, raw(target(typo))), t: func() *v1alpha1.GitTarget {
				edited := target(typo)
				edited.Spec.CommitMessage.Single = "{{.Verb}} {{.Object}}!"
				return edited
			}()},
		{name: "refuses a new target whose template does not parse",
			req: ownRequest(admissionv1.Create, "GitTarget", "a", "live", nil, nil), t: target("{{.Nope"), says: "GitTarget a/live: spec.commitMessage:"},
		{name: "refuses a new target whose template is of a form the writer does not take",
			req: ownRequest(admissionv1.Create, "GitTarget", "a", "live", nil, nil), t: target(`{{define "x"}}y{{end}}`), says: "{{define}}"},
		{name: "takes an update pointing at another provider that keeps a template no longer taken",
			req: ownRequest(admissionv1.Update, "GitTarget", "a", "live", nil, raw(target(`{{define "x"}}y{{end}}`))), t: func() *v1alpha1.GitTarget {
				moved := target(`{{define "x"}}y{{end}}`)
				moved.Spec.ProviderRef.Name = "mirror"
				return moved
			}()},
		{name: "takes a new target with good templates",
			req: ownRequest(admissionv1.Create, "GitTarget", "a", "live", nil, nil), t: target("{{range .Changes}}- {{.Object}}{{end}}")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := newTemplatesProblem(tc.req, tc.t)
			if tc.says == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.says)
		})
	}
}

// ownRequest is eve's admission request for one of the operator's own kinds.
func ownRequest(op admissionv1.Operation, kind, namespace, name string, obj, old []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: namespace, Name: name,
		Kind:     metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: kind},
		UserInfo: authnv1.UserInfo{Username: "eve"}, Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old}}}
}

// askedAuthorizer answers every question with allow and keeps them.
type askedAuthorizer struct {
	allow bool
	asked []ReadAccess
}

func (a *askedAuthorizer) Allowed(_ context.Context, _ authnv1.UserInfo, access ReadAccess) (bool, error) {
	a.asked = append(a.asked, access)
	return a.allow, nil
}

func TestAGitProvidersAuthorMustBeAllowedToReadItsSecret(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	provider := func(secret string) []byte {
		p := v1alpha1.GitProvider{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "GitProvider"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "git"}, Spec: v1alpha1.GitProviderSpec{URL: "https://git.example.com/r.git"}}
		if secret != "" {
			p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: secret}
		}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		return b
	}
	request := func(op admissionv1.Operation, obj, old []byte) admission.Request {
		return ownRequest(op, "GitProvider", "team-a", "git", obj, old)
	}
	cases := []struct {
		name    string
		req     admission.Request
		allow   bool
		allowed bool
		asked   []ReadAccess
	}{
		{"refuses a provider naming a Secret its author may not read", request(admissionv1.Create, provider("flux-git"), nil), false, false,
			[]ReadAccess{{Verb: "get", Resource: "secrets", Namespace: "team-a", Name: "flux-git"}}},
		{"takes one naming a Secret its author may read", request(admissionv1.Create, provider("flux-git"), nil), true, true,
			[]ReadAccess{{Verb: "get", Resource: "secrets", Namespace: "team-a", Name: "flux-git"}}},
		{"asks nothing of a provider without a Secret", request(admissionv1.Create, provider(""), nil), false, true, nil},
		{"asks nothing of an update that keeps the Secret", request(admissionv1.Update, provider("flux-git"), provider("flux-git")), false, true, nil},
		{"checks an update that names another Secret", request(admissionv1.Update, provider("other"), provider("flux-git")), false, false,
			[]ReadAccess{{Verb: "get", Resource: "secrets", Namespace: "team-a", Name: "other"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			authz := &askedAuthorizer{allow: tc.allow}
			o := &Own{Decoder: admission.NewDecoder(scheme), Authorizer: authz}
			resp := o.Handle(context.Background(), tc.req)
			assert.Equal(t, tc.allowed, resp.Allowed, resp.Result)
			assert.Equal(t, tc.asked, authz.asked)
			if !tc.allowed {
				assert.Contains(t, resp.Result.Message, "GitProvider team-a/git: spec.secretRef: eve may not get secrets/")
			}
		})
	}
}

func TestAGitProviderWhoseAllowedBranchesCannotBeReadIsRefused(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	provider := func(label string, branches ...string) []byte {
		p := v1alpha1.GitProvider{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "GitProvider"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "git", Labels: map[string]string{"l": label}},
			Spec:       v1alpha1.GitProviderSpec{URL: "https://git.example.com/r.git", AllowedBranches: branches}}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		return b
	}
	o := &Own{Decoder: admission.NewDecoder(scheme), Authorizer: &askedAuthorizer{}}
	resp := o.Handle(context.Background(), ownRequest(admissionv1.Create, "GitProvider", "team-a", "git", provider("a", "main", "release-[0-9"), nil))
	require.False(t, resp.Allowed)
	assert.Equal(t, `GitProvider team-a/git: spec.allowedBranches: "release-[0-9" is not a valid pattern (path.Match syntax: *, ?, [a-z], \ to escape; a [ needs its ])`,
		resp.Result.Message)
	resp = o.Handle(context.Background(), ownRequest(admissionv1.Update, "GitProvider", "team-a", "git", provider("b", "release-[0-9"), provider("a", "release-[0-9")))
	assert.True(t, resp.Allowed, "a stored pattern does not keep its provider from being labelled")
	resp = o.Handle(context.Background(), ownRequest(admissionv1.Update, "GitProvider", "team-a", "git", provider("a", "release-[0-9]"), provider("a", "release-[0-9")))
	assert.True(t, resp.Allowed, "nor from being fixed")
	resp = o.Handle(context.Background(), ownRequest(admissionv1.Update, "GitProvider", "team-a", "git", provider("a", "main", "release-[0-9"), provider("a", "release-[0-9")))
	assert.True(t, resp.Allowed, "nor its list from being edited otherwise")
	resp = o.Handle(context.Background(), ownRequest(admissionv1.Update, "GitProvider", "team-a", "git", provider("a", "main", "env/[a"), provider("a", "main")))
	assert.False(t, resp.Allowed, "a pattern the update adds is read")
}

// refusingAuthorizer allows everything but what it lists, and keeps the questions.
type refusingAuthorizer struct {
	refused []ReadAccess
	asked   []ReadAccess
}

func (a *refusingAuthorizer) Allowed(_ context.Context, _ authnv1.UserInfo, access ReadAccess) (bool, error) {
	a.asked = append(a.asked, access)
	return !slices.Contains(a.refused, access), nil
}

func TestAClusterWatchRulesAuthorMustBeAllowedToUpdateTheGitTargetItNames(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	rule := v1alpha1.ClusterWatchRule{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ClusterWatchRule"},
		ObjectMeta: metav1.ObjectMeta{Name: "roles"},
		Spec: v1alpha1.ClusterWatchRuleSpec{TargetRef: v1alpha1.NamespacedObjectReference{Namespace: "team-a", Name: "live"},
			Rules: []v1alpha1.ClusterResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}}}}}}
	raw, err := json.Marshal(rule)
	require.NoError(t, err)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Name: "roles",
		Kind:     metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: "ClusterWatchRule"},
		UserInfo: authnv1.UserInfo{Username: "mallory"}, Object: runtime.RawExtension{Raw: raw}}}
	read := ReadAccess{Verb: "list", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}
	route := ReadAccess{Verb: "update", Group: "reverser.gitops.dev", Resource: "gittargets", Namespace: "team-a", Name: "live"}
	cases := []struct {
		name    string
		refused []ReadAccess
		allowed bool
		asked   []ReadAccess
		says    string
	}{
		{"refuses a rule into a GitTarget its author may not update", []ReadAccess{route}, false, []ReadAccess{read, route},
			"ClusterWatchRule roles: mallory may not update gittargets.reverser.gitops.dev/live in namespace team-a; the operator commits"},
		{"takes a rule whose author may read what it selects and update its GitTarget", nil, true, []ReadAccess{read, route}, ""},
		{"says first what its author may not read", []ReadAccess{read, route}, false, []ReadAccess{read},
			"ClusterWatchRule roles: mallory may not list clusterroles.rbac.authorization.k8s.io in every namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			authz := &refusingAuthorizer{refused: tc.refused}
			o := &Own{Decoder: admission.NewDecoder(scheme), Authorizer: authz, Client: fake.NewClientBuilder().WithScheme(scheme).Build()}
			resp := o.Handle(context.Background(), req)
			assert.Equal(t, tc.allowed, resp.Allowed, resp.Result)
			assert.Equal(t, tc.asked, authz.asked)
			if tc.says != "" {
				assert.Contains(t, resp.Result.Message, tc.says)
			}
		})
	}
}

func TestWhoChoosesATargetsRecipientsMustReadWhatClusterWatchRulesRouteIntoIt(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	backup := v1alpha1.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: "all-secrets"}, Spec: v1alpha1.ClusterWatchRuleSpec{
		TargetRef: v1alpha1.NamespacedObjectReference{Namespace: "platform", Name: "backup"},
		Rules: []v1alpha1.ClusterResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets"}},
			NamespaceSelector: &metav1.LabelSelector{}}}}}
	// A WatchRule of the target's namespace routing its Secrets: the read it needs is the one
	// asked of every author of recipients, and not asked twice.
	local := v1alpha1.WatchRule{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "local-secrets"}, Spec: v1alpha1.WatchRuleSpec{
		TargetRef: v1alpha1.LocalObjectReference{Name: "backup"}, Rules: []v1alpha1.ResourceRule{{APIGroups: []string{""}, Resources: []string{"secrets"}}}}}
	target := func(recipient string, sensitive ...string) []byte {
		tg := v1alpha1.GitTarget{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "GitTarget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "backup"},
			Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: "main", Path: "backup",
				Encryption: &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{Recipients: []string{recipient}}}}}
		for _, res := range sensitive {
			tg.Spec.Encryption.SensitiveResources = append(tg.Spec.Encryption.SensitiveResources, v1alpha1.GroupResource{Group: "example.com", Resource: res})
		}
		b, err := json.Marshal(tg)
		require.NoError(t, err)
		return b
	}
	request := func(op admissionv1.Operation, obj, old []byte) admission.Request {
		return ownRequest(op, "GitTarget", "platform", "backup", obj, old)
	}
	own := ReadAccess{Verb: "get", Resource: "secrets", Namespace: "platform"}
	everywhere := ReadAccess{Verb: "get", Resource: "secrets"}
	cases := []struct {
		name    string
		req     admission.Request
		refused []ReadAccess
		allowed bool
		asked   []ReadAccess
	}{
		{"refuses new recipients from one who may not read the Secrets routed in from other namespaces",
			request(admissionv1.Create, target("age1new"), nil), []ReadAccess{everywhere}, false, []ReadAccess{own, everywhere}},
		{"takes them from one who may", request(admissionv1.Create, target("age1new"), nil), nil, true, []ReadAccess{own, everywhere}},
		{"checks an update that changes the recipients",
			request(admissionv1.Update, target("age1new"), target("age1old")), []ReadAccess{everywhere}, false, []ReadAccess{own, everywhere}},
		{"does not ask again on an update that keeps them",
			request(admissionv1.Update, retitled(t, target("age1old")), target("age1old")), []ReadAccess{everywhere}, true, []ReadAccess{own}},
		{"asks nothing of an update that keeps the spec (a label, a finalizer)",
			request(admissionv1.Update, target("age1old"), target("age1old")), []ReadAccess{everywhere}, true, nil},
		{"does not ask when the target only encrypts more",
			request(admissionv1.Update, target("age1old", "tokens"), target("age1old")), []ReadAccess{everywhere}, true, []ReadAccess{own}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			authz := &refusingAuthorizer{refused: tc.refused}
			o := &Own{Decoder: admission.NewDecoder(scheme), Authorizer: authz,
				Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(backup.DeepCopy(), local.DeepCopy()).Build()}
			resp := o.Handle(context.Background(), tc.req)
			assert.Equal(t, tc.allowed, resp.Allowed, resp.Result)
			assert.Equal(t, tc.asked, authz.asked)
			if !tc.allowed {
				assert.Contains(t, resp.Result.Message, "GitTarget platform/backup: spec.encryption: eve may not get secrets in every namespace; "+
					"ClusterWatchRule all-secrets route them into the GitTarget, and whom the GitTarget encrypts for can open them")
			}
		})
	}
}

// retitled is the GitTarget raw with a commit message template of its own.
func retitled(t *testing.T, raw []byte) []byte {
	t.Helper()
	var tg v1alpha1.GitTarget
	require.NoError(t, json.Unmarshal(raw, &tg))
	tg.Spec.CommitMessage.Single = "tidy"
	b, err := json.Marshal(tg)
	require.NoError(t, err)
	return b
}

func TestSpecUnchanged(t *testing.T) {
	stored := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "live", Finalizers: []string{"foregroundDeletion"}},
		Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: "main", Path: "live"}}
	update := func(edit func(*v1alpha1.GitTarget)) admission.Request {
		next := stored.DeepCopy()
		edit(next)
		oldRaw, err := json.Marshal(stored)
		require.NoError(t, err)
		newRaw, err := json.Marshal(next)
		require.NoError(t, err)
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
			OldObject: runtime.RawExtension{Raw: oldRaw}, Object: runtime.RawExtension{Raw: newRaw}}}
	}
	cases := []struct {
		name string
		req  admission.Request
		want bool
	}{
		{"takes an update removing a finalizer for one that keeps the spec", update(func(t *v1alpha1.GitTarget) { t.Finalizers = nil }), true},
		{"takes a label for one that keeps the spec", update(func(t *v1alpha1.GitTarget) { t.Labels = map[string]string{"team": "a"} }), true},
		{"sees a new folder", update(func(t *v1alpha1.GitTarget) { t.Spec.Path = "elsewhere" }), false},
		{"sees a new template", update(func(t *v1alpha1.GitTarget) { t.Spec.CommitMessage.Single = "x" }), false},
		{"never takes a create for an update", admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
			Object: update(func(*v1alpha1.GitTarget) {}).Object}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, specUnchanged(tc.req))
		})
	}
}

func TestAGitTargetWhoseStoredTemplateNoLongerPassesCanStillBeLabelledAndLetGo(t *testing.T) {
	const refused = `{{define "x"}}y{{end}}` // stored before templates were checked as they are now
	_, err := batch.ParseMessages(refused, "")
	require.Error(t, err)
	stored := v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "live", Finalizers: []string{"foregroundDeletion"}},
		Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: "main", Path: "live",
			CommitMessage: v1alpha1.CommitMessage{Single: refused}}}
	letGo := stored.DeepCopy()
	letGo.Finalizers = nil // the garbage collector ends the foreground deletion
	oldRaw, err := json.Marshal(stored)
	require.NoError(t, err)
	newRaw, err := json.Marshal(letGo)
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	o := &Own{Decoder: admission.NewDecoder(scheme), Client: fake.NewClientBuilder().WithScheme(scheme).Build()}
	resp := o.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, Kind: metav1.GroupVersionKind{Kind: "GitTarget"},
		OldObject: runtime.RawExtension{Raw: oldRaw}, Object: runtime.RawExtension{Raw: newRaw}}})
	assert.True(t, resp.Allowed, resp.Result)
}
