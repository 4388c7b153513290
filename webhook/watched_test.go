package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/watcher/attribution"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// leaderOf is a Locator that knows only the targets it writes, as the writer does.
type leaderOf map[types.NamespacedName]string

func (l leaderOf) Locate(target types.NamespacedName, _ schema.GroupVersionResource, _, _, _ string) batch.Location {
	if p, ok := l[target]; ok {
		return batch.Location{Path: p, Problem: "already held", RemovalProblem: "shared with another object"}
	}
	return batch.Location{}
}

func TestLocateUsesTheCanonicalPathForATargetTheWriterDoesNotKnow(t *testing.T) {
	known := types.NamespacedName{Namespace: "a", Name: "written-here"}
	elsewhere := types.NamespacedName{Namespace: "a", Name: "written-by-the-leader"}
	w := &Watched{View: &View{Locator: leaderOf{known: "live/custom.yaml"}}, Sensitive: func(schema.GroupResource) bool { return false }}
	targets := []TargetState{{Key: known, Folder: "live"}, {Key: elsewhere, Folder: "live"}}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}
	w.locate(targets, Request{Kind: "ConfigMap", Namespace: "a", Name: "app"}, req)
	assert.Equal(t, "live/custom.yaml", targets[0].Path)
	assert.Equal(t, "already held", targets[0].PathProblem)
	assert.Equal(t, "shared with another object", targets[0].RemovalProblem, "a deletion is judged by it")
	assert.Equal(t, "live/a/configmaps/app.yaml", targets[1].Path, "the same verdict and warning on every replica")
	assert.Empty(t, targets[1].PathProblem)
}

func TestReadableFieldsAreFoundForAnObjectATargetHoldsEncrypted(t *testing.T) {
	w := &Watched{View: NewView(nil, logr.Discard()), Sensitive: func(schema.GroupResource) bool { return false }}
	raw := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"a","name":"creds"},"data":{"k":"v"},"binaryData":{"b":"QkxPQg=="}}`)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Object: k8sruntime.RawExtension{Raw: raw}}}
	for _, encrypted := range []bool{false, true} {
		r := Request{Operation: Update, Resource: schema.GroupResource{Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "a", Name: "creds"}
		w.inspect(&r, req, []TargetState{{Key: types.NamespacedName{Namespace: "a", Name: "t"}, Encrypted: encrypted}})
		if encrypted {
			assert.Equal(t, []string{"binaryData"}, r.ReadableFields, "judged as the writer will: encrypted")
		} else {
			assert.Empty(t, r.ReadableFields, "a plaintext ConfigMap keeps every field readable, as it should")
		}
	}
}

func TestTheSecretsOfGitProvidersAndGitTargetsAreSkippedLikeKeyMaterial(t *testing.T) {
	provider := v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "origin"}}
	provider.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "git-auth"}
	encrypting := v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "live"}}
	encrypting.Spec.Encryption = &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-age"}}}
	plain := v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "docs"}}
	v := NewView(nil, logr.Discard())
	v.snap.Store(&snapshot{keptOut: keptOutOfGit([]v1alpha1.GitProvider{provider}, []v1alpha1.GitTarget{encrypting, plain})})
	w := &Watched{View: v, Sensitive: func(schema.GroupResource) bool { return true }}
	targets := []TargetState{{Key: types.NamespacedName{Namespace: "a", Name: "t"}}}
	for name, want := range map[string]bool{
		"git-auth":         true,  // a GitProvider's credentials
		"sops-age":         true,  // a GitTarget's age identities, even as an empty placeholder for generateWhenMissing
		"live-sops-digest": true,  // and its digest key
		"docs-sops-digest": false, // a target without encryption keeps no digest key
		"db":               false,
	} {
		raw := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"a","name":"` + name + `"},"data":{"password":"VDBLRU4="}}`)
		for op, req := range map[Operation]admissionv1.AdmissionRequest{
			Create: {Object: k8sruntime.RawExtension{Raw: raw}},
			Delete: {OldObject: k8sruntime.RawExtension{Raw: raw}},
		} {
			r := Request{Operation: op, Resource: schema.GroupResource{Resource: "secrets"}, Namespace: "a", Name: name}
			w.inspect(&r, admission.Request{AdmissionRequest: req}, targets)
			assert.Equal(t, want, r.KeyMaterial, "%s of %s", op, name)
		}
	}
}

func TestAGitProviderWhoseURLCarriesATokenIsFoundBeforeItIsJudged(t *testing.T) {
	w := &Watched{View: NewView(nil, logr.Discard()), Sensitive: func(schema.GroupResource) bool { return false }}
	targets := []TargetState{{Key: types.NamespacedName{Namespace: "a", Name: "t"}}}
	for url, want := range map[string]bool{"https://ghp_TOKEN@github.com/org/repo": true, "ssh://git@github.com/org/repo": false} {
		raw := []byte(`{"apiVersion":"reverser.gitops.dev/v1alpha1","kind":"GitProvider","metadata":{"namespace":"a","name":"origin"},"spec":{"url":"` + url + `"}}`)
		r := Request{Operation: Create, Resource: batch.GitProviders, Kind: "GitProvider", Namespace: "a", Name: "origin"}
		w.inspect(&r, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Object: k8sruntime.RawExtension{Raw: raw}}}, targets)
		assert.Equal(t, want, r.CredentialsProblem != "", url)
		assert.NotContains(t, r.CredentialsProblem, "ghp_TOKEN", "the reason never quotes them")
	}
}

func TestRouteFollowsTheWatcherWhenAControllerAdoptsOrOrphansAnObject(t *testing.T) {
	key := types.NamespacedName{Namespace: "a", Name: "t"}
	free := &partialMeta{}
	owned := &partialMeta{}
	owned.Metadata.OwnerReferences = []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}
	upd := Request{Operation: Update, Resource: schema.GroupResource{Resource: "configmaps"}, Namespace: "a", Name: "app"}
	cases := []struct {
		name                   string
		create, update, delete bool
		obj, old               *partialMeta
		targets, judged        bool
		more                   bool // the orphaning write changes more than owner references
	}{
		{name: "records an adoption under a rule that captures deletes but not updates, which removes it from Git",
			delete: true, obj: owned, old: free, targets: true},
		{name: "records no adoption under a rule that captures updates but not deletes, which leaves Git alone",
			update: true, obj: owned, old: free},
		{name: "records, never judges, an orphaned object under a rule that captures creates only, which writes it",
			create: true, obj: free, old: owned, targets: true},
		{name: "records, never judges, an orphaned object under a rule that captures updates only, which writes it",
			update: true, obj: free, old: owned, targets: true},
		{name: "judges as a creation an orphaning write that changes more than owner references",
			update: true, obj: free, old: owned, targets: true, judged: true, more: true},
		{name: "skips a write to an object a controller owns before and after",
			create: true, update: true, delete: true, obj: owned, old: owned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := NewView(nil, logr.Discard())
			v.snap.Store(&snapshot{routes: []route{rt([]string{""}, []string{"configmaps"}, tc.create, tc.update, tc.delete)},
				targets: map[types.NamespacedName]TargetState{key: {Key: key}}})
			targets, judged, orphaned := (&Watched{View: v}).route(context.Background(), upd, tc.obj, tc.old, func() bool { return !tc.more })
			assert.Equal(t, tc.targets, len(targets) > 0, "targets")
			assert.Equal(t, tc.judged, judged, "judged")
			assert.Equal(t, tc.obj == free && tc.old == owned, orphaned, "orphaned")
		})
	}
}

func TestAnUpdateThatStoresNothingNewIsAllowedWhateverTheTarget(t *testing.T) {
	key := types.NamespacedName{Namespace: "a", Name: "t"}
	v := NewView(nil, logr.Discard())
	v.snap.Store(&snapshot{routes: []route{rt([]string{""}, []string{"configmaps"}, true, true, true)},
		targets: map[types.NamespacedName]TargetState{key: {Key: key, Stalled: true, StalledMessage: "live/run.sh is not a YAML manifest"}}})
	w := &Watched{View: v, Sensitive: func(schema.GroupResource) bool { return false }}
	const kubectlOwnsK = `{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2026-12-05T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:k":{}}}}`
	stored := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"a","name":"app","resourceVersion":"7",` +
		`"managedFields":[` + kubectlOwnsK + `]},"data":{"k":"v"}}`
	withUnowned := strings.Replace(stored, `"data":{"k":"v"}`, `"data":{"k":"v","d":"default"}`, 1)
	controllerWrites := strings.Replace(stored, `"name":"app",`, `"name":"app","annotations":{"bound-by":"controller"},`, 1)
	controllerWrites = strings.Replace(controllerWrites, kubectlOwnsK, kubectlOwnsK+
		`,{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-12-05T10:01:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:bound-by":{}}}}}`, 1)
	deleting := strings.Replace(stored, `"name":"app",`, `"name":"app","deletionTimestamp":"2026-12-05T10:02:00Z","finalizers":[]`+`,`, 1)
	finalizing := strings.Replace(deleting, `"finalizers":[]`, `"finalizers":["example.com/cleanup"]`, 1)
	update := func(obj string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "app", Namespace: "a", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Object:   k8sruntime.RawExtension{Raw: []byte(obj)}, OldObject: k8sruntime.RawExtension{Raw: []byte(stored)}}}
	}
	owned := strings.Replace(stored, `"name":"app",`, `"name":"app","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"parent","uid":"6b1c7d3e-0000-4000-8000-000000000003"}],`, 1)
	owned = strings.Replace(owned, kubectlOwnsK, kubectlOwnsK+
		`,{"manager":"kubectl-patch","operation":"Update","apiVersion":"v1","time":"2026-12-05T10:01:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"6b1c7d3e-0000-4000-8000-000000000003\"}":{}}}}}`, 1)
	controlled := strings.Replace(stored, `"name":"app",`, `"name":"app","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"api","uid":"6b1c7d3e-0000-4000-8000-000000000004","controller":true}],`, 1)
	labelled := strings.Replace(stored, `"name":"app",`, `"name":"app","labels":{"x":"y"},`, 1)
	labelled = strings.Replace(labelled, kubectlOwnsK, kubectlOwnsK+
		`,{"manager":"kubectl-label","operation":"Update","apiVersion":"v1","time":"2026-12-05T10:01:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:x":{}}}}}`, 1)
	cases := []struct {
		name     string
		old, obj string
		allowed  bool
	}{
		{"allows re-applying the stored object, byte for byte", stored, stored, true},
		{"allows an update that differs only in its resourceVersion", stored, strings.Replace(stored, `"resourceVersion":"7"`, `"resourceVersion":"8"`, 1), true},
		{"denies a change of a value", stored, strings.Replace(stored, `"k":"v"`, `"k":"w"`, 1), false},
		{"denies a change of a label", stored, labelled, false},
		{"denies a change of field ownership that makes the writer write a field", withUnowned, strings.Replace(withUnowned, `"f:k":{}`, `"f:k":{},"f:d":{}`, 1), false},
		{"allows a field only the cluster's controllers own, which the writer leaves out", stored, controllerWrites, true},
		{"allows a change of a field no one owns, which the writer leaves out", withUnowned, strings.Replace(withUnowned, `"default"`, `"other"`, 1), true},
		{"allows an owner reference someone adds, which the writer leaves out", stored, owned, true},
		{"allows an object its controller orphans, never judged: the garbage collector is never blocked", controlled, stored, true},
		{"denies an orphaning write that also changes a value, judged as a creation", controlled, strings.Replace(stored, `"k":"v"`, `"k":"w"`, 1), false},
		{"denies an orphaning write that also changes a field the writer leaves out, judged as a creation",
			strings.Replace(withUnowned, `"name":"app",`, `"name":"app","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"api","uid":"6b1c7d3e-0000-4000-8000-000000000004","controller":true}],`, 1),
			strings.Replace(withUnowned, `"default"`, `"other"`, 1), false},
		{"allows a controller removing its finalizer from an object being deleted", finalizing, deleting, true},
		{"denies a change of a value of an object being deleted", finalizing, strings.Replace(finalizing, `"k":"v"`, `"k":"w"`, 1), false},
		{"denies a label only a cluster controller owns, which moves the object between targets",
			stored, strings.Replace(controllerWrites, `"annotations":{"bound-by":"controller"}`, `"labels":{"team":"b"}`, 1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := update(tc.obj)
			req.OldObject.Raw = []byte(tc.old)
			resp := w.Handle(context.Background(), req)
			assert.Equal(t, tc.allowed, resp.Allowed)
			if !tc.allowed {
				assert.Contains(t, resp.Result.Message, "live/run.sh", "the target's reason")
			}
		})
	}
	t.Run("denies a field only a cluster controller owns of an object the writer encrypts, which it writes whole", func(t *testing.T) {
		secrets := &Watched{View: v, Sensitive: func(gr schema.GroupResource) bool { return gr.Resource == "secrets" }}
		const kubectlOwnsPassword = `{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2026-12-05T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:password":{}}}}`
		old := `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"a","name":"db","resourceVersion":"7","managedFields":[` +
			kubectlOwnsPassword + `]},"data":{"password":"aHVudGVyMg=="}}`
		filled := strings.Replace(old, `"data":{"password":"aHVudGVyMg=="}`, `"data":{"password":"aHVudGVyMg==","token":"dG9rZW4="}`, 1)
		filled = strings.Replace(filled, kubectlOwnsPassword, kubectlOwnsPassword+
			`,{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-12-05T10:01:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:token":{}}}}`, 1)
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "db", Namespace: "a", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"},
			Object:   k8sruntime.RawExtension{Raw: []byte(filled)}, OldObject: k8sruntime.RawExtension{Raw: []byte(old)}}}
		secrets.View = NewView(nil, logr.Discard())
		secrets.View.snap.Store(&snapshot{routes: []route{rt([]string{""}, []string{"secrets"}, true, true, true)},
			targets: map[types.NamespacedName]TargetState{key: {Key: key, Stalled: true, StalledMessage: "live/run.sh is not a YAML manifest"}}})
		assert.False(t, secrets.Handle(context.Background(), req).Allowed, "the token would be written, encrypted, once the target recovers")
	})
	t.Run("denies a change of a field no one owns when the writer keeps defaulted fields", func(t *testing.T) {
		keeping := &Watched{View: v, Sensitive: w.Sensitive, KeepDefaultedFields: true}
		req := update(strings.Replace(withUnowned, `"default"`, `"other"`, 1))
		req.OldObject.Raw = []byte(withUnowned)
		assert.False(t, keeping.Handle(context.Background(), req).Allowed)
		assert.False(t, keeping.Handle(context.Background(), update(controllerWrites)).Allowed, "an annotation is written whoever owns it")
	})
	t.Run("allows the final delete of an object whose deletion was asked for before, and judges a first one", func(t *testing.T) {
		del := func(old string) admission.Request {
			return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Delete, Name: "app", Namespace: "a", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
				Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				OldObject: k8sruntime.RawExtension{Raw: []byte(old)}}}
		}
		assert.True(t, w.Handle(context.Background(), del(deleting)).Allowed,
			"the kubelet finishing a graceful deletion, judged when it was asked for: denying it would only leave the object terminating")
		assert.False(t, w.Handle(context.Background(), del(stored)).Allowed, "a new deletion is judged")
	})
}

func TestARequestIsDecodedWhateverTheShapeOfItsObjectsTopLevelType(t *testing.T) {
	for _, raw := range []string{
		`{"kind":"Widget","metadata":{"name":"a"},"type":1}`,
		`{"kind":"Widget","metadata":{"name":"a"},"type":{"shape":"round"}}`,
		`{"kind":"Widget","metadata":{"name":"a"},"type":null}`,
	} {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
			Object: k8sruntime.RawExtension{Raw: []byte(raw)}, OldObject: k8sruntime.RawExtension{Raw: []byte(raw)}}}
		_, obj, old, err := requestOf(req)
		if assert.NoError(t, err, "a custom resource's own field: %s", raw) {
			assert.Equal(t, "a", obj.Metadata.Name)
			assert.Empty(t, obj.secretType(), "no Secret type")
			assert.Empty(t, old.secretType())
		}
	}
	_, secret, _, err := requestOf(admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
		Object: k8sruntime.RawExtension{Raw: []byte(`{"kind":"Secret","metadata":{"name":"s"},"type":"kubernetes.io/tls"}`)}}})
	assert.NoError(t, err)
	assert.Equal(t, "kubernetes.io/tls", secret.secretType())
}

// countingReader serves namespaces labelled team=a and counts the reads.
type countingReader struct {
	reads int
}

func (r *countingReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	obj.SetLabels(map[string]string{"team": "a"})
	return nil
}

func (r *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

// emptyCache is an informer cache that has seen no namespace (only Get is used).
type emptyCache struct {
	cache.Cache
}

func (emptyCache) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, key.Name)
}

func TestANamespaceTheCacheLacksIsReadOncePerRequest(t *testing.T) {
	live := &countingReader{}
	v := &View{Cache: emptyCache{}, Live: live}
	labelsOf := v.nsLabels(context.Background())
	for range 6 { // three rules with a namespaceSelector, an update: old and new
		assert.Equal(t, "a", labelsOf("fresh")["team"])
	}
	assert.Equal(t, 1, live.reads, "one read from the API server, however many rules ask")
}

// listingCache lists what its client holds, as the manager's cache would.
type listingCache struct {
	cache.Cache
	c client.Client
}

func (l listingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return l.c.List(ctx, list, opts...)
}

func TestAGitTargetBeingDeletedIsRoutedNothing(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	now := metav1.Now()
	deleting := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "old", DeletionTimestamp: &now, Finalizers: []string{"example.com/keep"}}}
	live := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "live"}}
	v := NewView(listingCache{c: fake.NewClientBuilder().WithScheme(scheme).WithObjects(deleting, live).Build()}, logr.Discard())

	require.NoError(t, v.rebuild(context.Background()))
	targets := v.snap.Load().targets
	assert.Contains(t, targets, client.ObjectKeyFromObject(live))
	assert.NotContains(t, targets, client.ObjectKeyFromObject(deleting), "it stopped writing: admission judges nothing for it")
}

func TestARuleOneOfWhoseResourceRulesCannotBeCompiledRoutesNothing(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	live := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "live"}}
	invalid := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}
	every := &metav1.LabelSelector{}
	rule := func(name string, resource string, objects, namespaces *metav1.LabelSelector) *v1alpha1.ClusterWatchRule {
		return &v1alpha1.ClusterWatchRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterWatchRuleSpec{
			TargetRef: v1alpha1.NamespacedObjectReference{Namespace: "team-a", Name: "live"},
			Rules: []v1alpha1.ClusterResourceRule{
				{ResourceRule: v1alpha1.ResourceRule{APIGroups: []string{""}, Resources: []string{"configmaps"}}, NamespaceSelector: every},
				{ResourceRule: v1alpha1.ResourceRule{APIGroups: []string{"", "rbac.authorization.k8s.io"}, Resources: []string{resource}, ObjectSelector: objects},
					NamespaceSelector: namespaces},
			}}}
	}
	v := NewView(listingCache{c: fake.NewClientBuilder().WithScheme(scheme).WithObjects(live,
		rule("broken", "secrets", invalid, every),   // the watcher reads every objectSelector: it registers nothing of this rule
		rule("roles", "clusterroles", nil, invalid), // it reads a namespaceSelector only for namespaced resources: this one it registers
	).Build()}, logr.Discard())

	require.NoError(t, v.rebuild(context.Background()))
	routes := v.snap.Load().routes
	require.Len(t, routes, 2, "nothing of the broken rule; all of the other")
	role := Request{Operation: Create, Resource: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, Name: "admin"}
	cm := Request{Operation: Create, Resource: schema.GroupResource{Resource: "configmaps"}, Namespace: "team-b", Name: "app"}
	noLabels := func(string) labels.Set { return labels.Set{} }
	assert.True(t, routes[1].routes(role, labels.Set{}, nil, noLabels), "its cluster-scoped resource is judged, as the watcher captures it")
	assert.False(t, routes[1].routes(Request{Operation: Create, Resource: schema.GroupResource{Resource: "clusterroles"}, Namespace: "team-b"}, labels.Set{}, nil, noLabels),
		"a selector it cannot read takes no namespace")
	assert.True(t, routes[0].routes(cm, labels.Set{}, nil, noLabels))
}

// A server-side apply of what is stored already is stored as nothing: no event will use its
// record up.
// recordingWatched is a leading replica's Watched entry whose view routes routes to one
// target, recording into the returned Book.
func recordingWatched(routes ...route) (*Watched, *attribution.Book) {
	key := types.NamespacedName{Namespace: "a", Name: "t"}
	v := NewView(nil, logr.Discard())
	v.snap.Store(&snapshot{routes: routes, targets: map[types.NamespacedName]TargetState{key: {Key: key}}})
	elected := make(chan struct{})
	close(elected)
	book := attribution.NewBook(0, 0)
	return &Watched{View: v, Sensitive: func(schema.GroupResource) bool { return false },
		Attribution: &attribution.Router{Book: book, Elected: elected, Log: logr.Discard()}}, book
}

func TestAnUpdateStoredAsNothingLeavesNoRecord(t *testing.T) {
	w, book := recordingWatched(rt([]string{""}, []string{"configmaps"}, true, true, true))
	stored := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"a","name":"app","uid":"u-1","resourceVersion":"7"},"data":{"k":"v"}}`
	update := func(obj string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "app", Namespace: "a", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, UserInfo: authv1.UserInfo{Username: "alice"},
			Object: k8sruntime.RawExtension{Raw: []byte(obj)}, OldObject: k8sruntime.RawExtension{Raw: []byte(stored)}}}
	}
	require.True(t, w.Handle(context.Background(), update(stored)).Allowed)
	assert.Zero(t, book.Len(), "the same object: nothing recorded")
	require.True(t, w.Handle(context.Background(), update(strings.Replace(stored, `"resourceVersion":"7"`, `"resourceVersion":"6"`, 1))).Allowed)
	assert.Zero(t, book.Len(), "the same object but for its resourceVersion: nothing recorded")

	changed := strings.Replace(stored, `"k":"v"`, `"k":"w"`, 1)
	require.True(t, w.Handle(context.Background(), update(changed)).Allowed)
	var obj, old unstructured.Unstructured
	require.NoError(t, obj.UnmarshalJSON([]byte(changed)))
	require.NoError(t, old.UnmarshalJSON([]byte(stored)))
	k, ok := attribution.KeyForRequest(attribution.Update, &obj, &old)
	require.True(t, ok)
	got, joined := book.Join(k)
	assert.True(t, joined, "a change is recorded under the key its event will have")
	assert.Equal(t, "alice", got.Username)
}

func TestWhoScaledAndWhoDeletedAreRecordedOnce(t *testing.T) {
	w, book := recordingWatched(rt([]string{""}, []string{"pods"}, true, true, true), rt([]string{"apps"}, []string{"deployments"}, true, true, true))
	recorded := &Recorded{Watched: w}

	scale := func(replicas string, dry bool) admission.Request {
		obj := `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"namespace":"a","name":"web","uid":"u-1","resourceVersion":"7"},"spec":{` + replicas + `}}`
		old := `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"namespace":"a","name":"web","uid":"u-1","resourceVersion":"7"},"spec":{"replicas":1}}`
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Name: "web", Namespace: "a",
			SubResource: ScaleSubresource, Kind: metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
			Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, UserInfo: authv1.UserInfo{Username: "bob"},
			DryRun: &dry, Object: k8sruntime.RawExtension{Raw: []byte(obj)}, OldObject: k8sruntime.RawExtension{Raw: []byte(old)}}}
	}
	require.True(t, recorded.Handle(context.Background(), scale(`"replicas":3`, true)).Allowed)
	require.True(t, recorded.Handle(context.Background(), scale(`"replicas":1`, false)).Allowed)
	assert.Zero(t, book.Len(), "a dry run, and a scale to the same count, record nothing")
	require.True(t, recorded.Handle(context.Background(), scale(`"replicas":3`, false)).Allowed)
	got, ok := book.Join(attribution.ScaleKey("u-1", "7", 3))
	assert.True(t, ok, "keyed by the Scale's UID and version, which are the Deployment's, and the count")
	assert.Equal(t, "bob", got.Username)

	running := `{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"a","name":"p","uid":"u-2","resourceVersion":"9"}}`
	terminating := strings.Replace(running, `"resourceVersion":"9"`, `"resourceVersion":"10","deletionTimestamp":"2026-12-06T20:00:30Z"`, 1)
	del := func(user, old string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Name: "p", Namespace: "a",
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			UserInfo: authv1.UserInfo{Username: user}, OldObject: k8sruntime.RawExtension{Raw: []byte(old)}}}
	}
	w.record(context.Background(), del("alice", running))                    // kubectl delete pod: a 30 s grace period
	w.record(context.Background(), del("system:node:worker-1", terminating)) // the kubelet, once its containers stopped
	got, ok = book.Join(attribution.DeleteKey("u-2"))
	assert.True(t, ok, "the kubelet finishing the graceful delete leaves alice's record unambiguous")
	assert.Equal(t, "alice", got.Username)
}

func TestANamespaceRelabelThatBringsItsObjectsIntoAStalledTargetIsDenied(t *testing.T) {
	prod := types.NamespacedName{Namespace: "ops", Name: "prod"}
	v := NewView(nil, logr.Discard())
	v.snap.Store(&snapshot{routes: []route{{target: prod, groups: set([]string{""}), resources: set([]string{"configmaps"}), cluster: true,
		objects: labels.Everything(), nsSelector: labels.SelectorFromSet(labels.Set{"mirror": "on"}), create: true, update: true, del: true}},
		targets: map[types.NamespacedName]TargetState{prod: {Key: prod, Stalled: true, StalledMessage: "live/run.sh is not a YAML manifest"}}})
	w := &Watched{View: v, Sensitive: func(schema.GroupResource) bool { return false }}
	namespace := func(labels string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{` + labels + `}}}`)
	}
	update := func(old, obj string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "team-a", Namespace: "team-a", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"},
			Object:   k8sruntime.RawExtension{Raw: namespace(obj)}, OldObject: k8sruntime.RawExtension{Raw: namespace(old)}}}
	}
	resp := w.Handle(context.Background(), update(`"team":"a"`, `"team":"a","mirror":"on"`))
	require.False(t, resp.Allowed)
	assert.Equal(t, metav1.StatusReason(ReasonTargetStalled), resp.Result.Reason)
	assert.Contains(t, resp.Result.Message, "Namespace team-a cannot be relabelled: its new labels bring its objects of configmaps into the rules of GitTarget ops/prod")
	assert.True(t, w.Handle(context.Background(), update(`"team":"a"`, `"team":"b"`)).Allowed, "a label no selector reads moves nothing")
	assert.False(t, w.Handle(context.Background(), update(`"mirror":"on"`, `"team":"a"`)).Allowed, "taking them out removes documents the folder cannot lose now")
}
