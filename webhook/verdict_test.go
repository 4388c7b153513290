package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

func TestDecide(t *testing.T) {
	live := TargetState{Key: types.NamespacedName{Namespace: "team-a", Name: "live"}, URL: "https://git.example.com/r.git",
		Branch: "main", Folder: "live", Path: "live/team-a/configmaps/app.yaml"}
	stalled := live
	stalled.Stalled, stalled.StalledMessage = true, "folder live cannot be owned: live/run.sh is not a YAML manifest"
	clash := live
	clash.PathProblem = "live/team-a/configmaps/app.yaml already holds ConfigMap team-a/other"
	encrypted := live
	encrypted.EncryptionReady = true
	sealed := live
	sealed.SensitiveResources = []schema.GroupResource{{Group: "bitnami.com", Resource: "sealedsecrets"}}
	sealed.EncryptionMessage = "spec.encryption.age is not set"
	changed := live
	changed.EncryptionUnchecked = true
	sealedReq := Request{Operation: Create, Resource: schema.GroupResource{Group: "bitnami.com", Resource: "sealedsecrets"}, Kind: "SealedSecret", Namespace: "team-a", Name: "db"}

	cm := Request{Operation: Create, Resource: schema.GroupResource{Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "team-a", Name: "app"}
	secret := Request{Operation: Create, Resource: schema.GroupResource{Resource: "secrets"}, Kind: "Secret", Namespace: "team-a", Name: "db"}
	delSecret := secret
	delSecret.Operation = Delete
	keys := secret
	keys.Name, keys.KeyMaterial = "sops-age", true
	updSecret := secret
	updSecret.Operation = Update
	leaving := live
	leaving.Leaving = true
	delCM := cm
	delCM.Operation = Delete
	keepingLive := live
	keepingLive.KeepsDeleted = true
	keeping := stalled
	keeping.KeepsDeleted = true
	inGit := encrypted
	inGit.Path, inGit.Encrypted = "live/team-a/configmaps/app.sops.yaml", true
	inGitNoKeys := inGit
	inGitNoKeys.EncryptionReady, inGitNoKeys.PathProblem = false, "never stored in plaintext: GitTarget team-a/live cannot encrypt"
	provider := Request{Operation: Create, Resource: batch.GitProviders, Kind: "GitProvider", Namespace: "team-a", Name: "origin",
		CredentialsProblem: "its spec.url carries credentials"}
	role := Request{Operation: Update, Resource: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, Kind: "ClusterRole", Name: "admin"}
	cleanProvider := provider
	cleanProvider.CredentialsProblem = ""
	target := Request{Operation: Delete, Resource: schema.GroupResource{Group: "reverser.gitops.dev", Resource: "gittargets"}, Kind: "GitTarget", Namespace: "team-a", Name: "live"}
	clusterDel := delCM
	clusterDel.ByCluster = true // the namespace controller
	clusterUpd := cm
	clusterUpd.Operation, clusterUpd.ByCluster = Update, true
	updCM := cm
	updCM.Operation = Update
	clusterNew := cm
	clusterNew.ByCluster = true // the service-account controller, a StatefulSet's claims
	// A document the writer would not remove: in a person's encrypted file of two objects.
	shared, absent := live, live
	shared.Path, shared.RemovalProblem = "live/team-a/configmaps/pair.sops.yaml", "live/team-a/configmaps/pair.sops.yaml holds 2 objects, some or all of them encrypted"
	sharedLeaving, keepingShared := shared, shared
	sharedLeaving.Leaving, keepingShared.KeepsDeleted, absent.Absent = true, true, true

	cases := []struct {
		name      string
		req       Request
		targets   []TargetState
		sensitive bool
		warn      bool
		allowed   bool
		reason    string
		contains  []string
		warnings  []string
	}{
		{name: "allows an object no rule routes", req: cm, allowed: true, reason: ReasonNotRouted},
		{name: "allows a routed object silently on a real request", req: cm, targets: []TargetState{live}, allowed: true, reason: ReasonAllowed},
		{name: "warns where a dry-run object lands", req: cm, targets: []TargetState{live}, warn: true, allowed: true, reason: ReasonAllowed,
			warnings: []string{"https://git.example.com/r.git main:live/team-a/configmaps/app.yaml"}},
		{name: "denies when the target folder is stalled, naming target, folder and file", req: cm, targets: []TargetState{stalled}, reason: ReasonTargetStalled,
			contains: []string{"ConfigMap team-a/app cannot be mirrored", "GitTarget team-a/live", "folder live", "live/run.sh",
				"Changing this object does not help: retry once GitTarget team-a/live is Ready again"}},
		{name: "denies a Secret when the target cannot encrypt, saying what to configure", req: secret, targets: []TargetState{live}, sensitive: true, reason: ReasonPlaintextSecret,
			contains: []string{"Secret team-a/db would be stored in plaintext", "configure encryption on GitTarget team-a/live", "spec.encryption.age.recipients"}},
		{name: "denies a resource the target lists as sensitive, quoting its EncryptionReady message", req: sealedReq, targets: []TargetState{sealed}, reason: ReasonPlaintextSecret,
			contains: []string{"bitnami.com/SealedSecret team-a/db would be stored in plaintext", "(spec.encryption.age is not set)"}},
		{name: "denies a Secret while the target's new spec has not had its encryption checked, saying to retry, not to fix it", req: secret,
			targets: []TargetState{changed}, sensitive: true, reason: ReasonPlaintextSecret,
			contains: []string{"GitTarget team-a/live is new or changed and its encryption has not been checked for its current spec yet",
				"kubectl wait --for=condition=EncryptionReady -n team-a gittarget/live"}},
		{name: "allows a resource another target lists as sensitive", req: sealedReq, targets: []TargetState{live}, allowed: true, reason: ReasonAllowed},
		{name: "allows a Secret when the target can encrypt", req: secret, targets: []TargetState{encrypted}, sensitive: true, allowed: true, reason: ReasonAllowed},
		{name: "denies a sensitive object with fields sops would leave readable, even when the target can encrypt", req: withReadable(sealedReq, "spec"),
			targets: []TargetState{withEncryption(sealed)}, reason: ReasonReadableFields,
			contains: []string{"bitnami.com/SealedSecret team-a/db cannot be written to GitTarget team-a/live", "[spec]", "would be readable in Git"}},
		{name: "denies an object of a resource no longer sensitive whose file is encrypted in Git when sops would leave a field readable, naming that file",
			req: withReadable(cm, "binaryData"), targets: []TargetState{inGit}, reason: ReasonReadableFields,
			contains: []string{"ConfigMap team-a/app cannot be written to GitTarget team-a/live", "[binaryData]",
				"live/team-a/configmaps/app.sops.yaml is encrypted in Git, so the writer keeps it encrypted: decrypt that file in Git"}},
		{name: "denies an object encrypted in Git on a target that can no longer encrypt with the writer's reason, before its readable fields",
			req: withReadable(cm, "binaryData"), targets: []TargetState{inGitNoKeys}, reason: ReasonPathConflict,
			contains: []string{"cannot encrypt"}},
		{name: "allows an object whose file is encrypted in Git when every field is one sops encrypts", req: cm, targets: []TargetState{inGit},
			allowed: true, reason: ReasonAllowed},
		{name: "allows deleting a Secret even without encryption", req: delSecret, targets: []TargetState{live}, sensitive: true, allowed: true, reason: ReasonAllowed},
		{name: "denies deleting when the folder cannot be written, saying which prune mode lets deletions through", req: delSecret, targets: []TargetState{stalled}, sensitive: true,
			reason: ReasonTargetStalled, contains: []string{"spec.prune.mode: Never"}},
		{name: "allows a Secret holding key material even when the target cannot encrypt, since no target writes it", req: keys, targets: []TargetState{live}, sensitive: true,
			allowed: true, reason: ReasonKeyMaterial},
		{name: "allows a Secret holding key material even when the folder is stalled", req: keys, targets: []TargetState{stalled}, sensitive: true,
			allowed: true, reason: ReasonKeyMaterial},
		{name: "warns on a dry run that a Secret holding key material is never written", req: keys, targets: []TargetState{live}, sensitive: true, warn: true,
			allowed: true, reason: ReasonKeyMaterial,
			warnings: []string{"Secret team-a/sops-age holds key material (an age private key, or the reverser.gitops.dev/key-material label) or a GitProvider's credentials and is never written to Git, whichever rule routes it"}},
		{name: "allows a Secret whose update moves it out of the target's selector even without encryption: Git deletes it", req: updSecret,
			targets: []TargetState{leaving}, sensitive: true, allowed: true, reason: ReasonAllowed},
		{name: "allows deleting when the folder cannot be written but the target never removes documents", req: delSecret, targets: []TargetState{keeping},
			sensitive: true, allowed: true, reason: ReasonAllowed},
		{name: "warns on a dry-run delete that the document is removed", req: delCM, targets: []TargetState{live}, warn: true,
			allowed: true, reason: ReasonAllowed, warnings: []string{"https://git.example.com/r.git main:live/team-a/configmaps/app.yaml is removed"}},
		{name: "warns nothing on a dry-run delete of an object the folder holds no document of", req: delCM, targets: []TargetState{absent}, warn: true,
			allowed: true, reason: ReasonAllowed},
		{name: "denies a deletion the writer would not carry out, naming the file and what to do", req: delCM, targets: []TargetState{shared}, reason: ReasonPathConflict,
			contains: []string{"ConfigMap team-a/app cannot be removed from GitTarget team-a/live: live/team-a/configmaps/pair.sops.yaml holds 2 objects"}},
		{name: "denies a change that takes the object out of the rules, which removes it too", req: updCM, targets: []TargetState{sharedLeaving}, reason: ReasonPathConflict},
		{name: "lets that deletion through a target pruning Never, which removes nothing, saying the document is kept", req: delCM, targets: []TargetState{keepingShared},
			warn: true, allowed: true, reason: ReasonAllowed,
			warnings: []string{"https://git.example.com/r.git main:live/team-a/configmaps/pair.sops.yaml is kept (GitTarget team-a/live: spec.prune.mode Never)"}},
		{name: "lets such a change by the cluster's own controllers through too", req: clusterUpd, targets: []TargetState{sharedLeaving}, allowed: true, reason: ReasonAllowed},
		{name: "lets that deletion by the cluster's own controllers through, so a namespace can terminate", req: clusterDel, targets: []TargetState{shared},
			allowed: true, reason: ReasonAllowed},
		{name: "warns on a dry-run delete that a target pruning Never keeps the document", req: delCM, targets: []TargetState{keepingLive}, warn: true,
			allowed: true, reason: ReasonAllowed,
			warnings: []string{"https://git.example.com/r.git main:live/team-a/configmaps/app.yaml is kept (GitTarget team-a/live: spec.prune.mode Never)"}},
		{name: "denies a path held by a different object", req: cm, targets: []TargetState{clash}, reason: ReasonPathConflict,
			contains: []string{"already holds ConfigMap team-a/other"}},
		{name: "denies when any one of several targets cannot write", req: cm, targets: []TargetState{live, stalled}, reason: ReasonTargetStalled},
		{name: "denies a GitProvider whose URL carries credentials before they reach Git", req: provider, targets: []TargetState{live},
			reason: ReasonURLCredentials, contains: []string{"reverser.gitops.dev/GitProvider team-a/origin cannot be written to GitTarget team-a/live: its spec.url carries credentials"}},
		{name: "denies a GitProvider whose URL carries credentials for the URL, also where its file is encrypted in Git, as the writer refuses it",
			req: withReadable(provider, "spec"), targets: []TargetState{inGit}, reason: ReasonURLCredentials},
		{name: "lets a GitProvider through a stalled target, since creating it may be what ends the stall", req: cleanProvider, targets: []TargetState{stalled},
			allowed: true, reason: ReasonAllowed},
		{name: "lets the deletion of a GitTarget through a stalled target it routes to", req: target, targets: []TargetState{stalled},
			allowed: true, reason: ReasonAllowed},
		{name: "lets a deletion by the cluster's own controllers through a stalled target, so a namespace can terminate", req: clusterDel, targets: []TargetState{stalled},
			allowed: true, reason: ReasonAllowed},
		{name: "lets an update by the cluster's own controllers through a stalled target, so a volume can be bound", req: clusterUpd, targets: []TargetState{stalled},
			allowed: true, reason: ReasonAllowed},
		{name: "lets a creation by the cluster's own controllers through a stalled target, so a new namespace gets its default ServiceAccount", req: clusterNew, targets: []TargetState{stalled},
			allowed: true, reason: ReasonAllowed},
		{name: "still denies a cluster controller's write a target that is not stalled would refuse", req: clusterNew, targets: []TargetState{clash}, reason: ReasonPathConflict},
		{name: "names a cluster-scoped object without a namespace", req: role, targets: []TargetState{stalled}, reason: ReasonTargetStalled,
			contains: []string{"rbac.authorization.k8s.io/ClusterRole admin cannot be mirrored"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.req, tc.targets, tc.sensitive, tc.warn)
			assert.Equal(t, tc.allowed, v.Allowed)
			assert.Equal(t, tc.reason, v.Reason)
			for _, c := range tc.contains {
				assert.Contains(t, v.Message, c)
			}
			assert.Equal(t, tc.warnings, v.Warnings)
		})
	}
}

func TestDecideIsTheSameForDryRun(t *testing.T) {
	stalled := TargetState{Key: types.NamespacedName{Namespace: "a", Name: "t"}, Stalled: true, StalledMessage: "x"}
	req := Request{Operation: Create, Resource: schema.GroupResource{Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "a", Name: "c"}
	dry := req
	dry.DryRun = true
	assert.Equal(t, Decide(req, []TargetState{stalled}, false, false), Decide(dry, []TargetState{stalled}, false, false))
}

func TestEncryptionState(t *testing.T) {
	cond := func(status metav1.ConditionStatus, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionEncryptionReady, Status: status, ObservedGeneration: gen, Message: "m"}}
	}
	cases := []struct {
		name           string
		conds          []metav1.Condition
		ready, checked bool
		message        string
		age            bool // spec.encryption.age is set
	}{
		{"is not ready without the condition", nil, false, true, "", false},
		{"is not checked without the condition when age is set: a GitTarget created a moment ago", nil, false, false, "", true},
		{"is ready when the condition is True for the current generation", cond(metav1.ConditionTrue, 2), true, true, "", true},
		{"is not ready when the condition is False, and says why", cond(metav1.ConditionFalse, 2), false, true, "m", true},
		{"is not ready, and not checked, when the True condition describes an older spec", cond(metav1.ConditionTrue, 1), false, false, "", true},
		{"is not checked when the False condition describes an older spec, and keeps why", cond(metav1.ConditionFalse, 1), false, false, "m", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gt := &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: v1alpha1.GitTargetStatus{Conditions: tc.conds}}
			gt.Spec.Encryption = &v1alpha1.Encryption{SensitiveResources: []v1alpha1.GroupResource{{Group: "bitnami.com", Resource: "sealedsecrets"}}}
			if tc.age {
				gt.Spec.Encryption.Age = &v1alpha1.AgeEncryption{Recipients: []string{"age1example"}}
			}
			st := targetState(gt, "")
			assert.Equal(t, tc.ready, st.EncryptionReady)
			assert.Equal(t, !tc.checked, st.EncryptionUnchecked)
			assert.Equal(t, tc.message, st.EncryptionMessage)
			assert.Equal(t, []schema.GroupResource{{Group: "bitnami.com", Resource: "sealedsecrets"}}, st.SensitiveResources)
		})
	}
}

func withReadable(r Request, fields ...string) Request {
	r.ReadableFields = fields
	return r
}

func withEncryption(t TargetState) TargetState {
	t.EncryptionReady = true
	return t
}

func TestCanonicalLocation(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	p, problem := CanonicalLocation("live", gvr, "team-a", "db", true)
	assert.Empty(t, problem)
	assert.Equal(t, "live/team-a/secrets/db.sops.yaml", p, "a sensitive object lands in a sops file, also in the dry-run warning of a replica that does not lead")
	p, _ = CanonicalLocation("live", gvr, "team-a", "db", false)
	assert.Equal(t, "live/team-a/secrets/db.yaml", p)
}

func TestObjectNamespace(t *testing.T) {
	tests := []struct {
		name                                    string
		group, resource, requestNamespace, want string
	}{
		{name: "takes a namespaced object's namespace from the request", resource: "configmaps", requestNamespace: "team-a", want: "team-a"},
		{name: "treats a Namespace, whose own name the API server sends as the namespace, as cluster-scoped", resource: "namespaces", requestNamespace: "team-a", want: ""},
		{name: "keeps a cluster-scoped object without a namespace", group: "rbac.authorization.k8s.io", resource: "clusterroles", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, objectNamespace(tt.group, tt.resource, tt.requestNamespace))
		})
	}
}

func TestByCluster(t *testing.T) {
	for user, want := range map[string]bool{
		"system:kube-controller-manager":                              true,
		"system:serviceaccount:kube-system:namespace-controller":      true,
		"system:serviceaccount:kube-system:generic-garbage-collector": true,
		"system:serviceaccount:team-a:deployer":                       false,
		"system:serviceaccount:kube-system:cronjob-controller":        true,
		"system:serviceaccount:kube-system:helm-controller":           false,
		"alice":                                false,
		"system:serviceaccount:kube-systemx:x": false,
	} {
		assert.Equal(t, want, byCluster(user), user)
	}
}

func TestDecideRelabel(t *testing.T) {
	prod := TargetState{Key: types.NamespacedName{Namespace: "ops", Name: "prod"}, URL: "https://git.example.com/r.git",
		Branch: "main", Folder: "live", EncryptionMessage: "spec.encryption.age is not set"}
	stalled := prod
	stalled.Stalled, stalled.StalledMessage = true, "folder live cannot be owned: live/run.sh is not a YAML manifest"
	keeping := stalled
	keeping.KeepsDeleted = true
	encrypting := prod
	encrypting.EncryptionReady, encrypting.EncryptionMessage = true, ""
	sealing := prod
	sealing.SensitiveResources = []schema.GroupResource{{Group: "bitnami.com", Resource: "sealedsecrets"}}
	secrets := []schema.GroupResource{{Resource: "secrets"}}
	configMaps := []schema.GroupResource{{Resource: "configmaps"}}
	relabel := Request{Operation: Update, Resource: namespacesResource, Kind: "Namespace", Name: "team-a"}
	byCluster := relabel
	byCluster.ByCluster = true
	vault := schema.GroupResource{Group: "vault.example.com", Resource: "vaultsecrets"}
	cases := []struct {
		name      string
		req       Request
		moves     []Move
		sensitive []schema.GroupResource
		reason    string
		says      []string
	}{
		{name: "allows new labels that move nothing", req: relabel, reason: ReasonAllowed},
		{name: "refuses new labels that bring a namespace's Secrets into a target that cannot encrypt",
			req: relabel, moves: []Move{{Target: prod, Joins: true, Resources: secrets}}, reason: ReasonPlaintextSecret,
			says: []string{"Namespace team-a cannot be relabelled", "its objects of secrets into the rules of GitTarget ops/prod",
				"would be stored in plaintext", "spec.encryption.age is not set"}},
		{name: "lets new labels bring Secrets into a target that can encrypt",
			req: relabel, moves: []Move{{Target: encrypting, Joins: true, Resources: secrets}}, reason: ReasonAllowed},
		{name: "lets new labels bring only ConfigMaps into a target that cannot encrypt",
			req: relabel, moves: []Move{{Target: prod, Joins: true, Resources: configMaps}}, reason: ReasonAllowed},
		{name: "lets new labels take Secrets out of a target that cannot encrypt",
			req: relabel, moves: []Move{{Target: prod, Resources: secrets}}, reason: ReasonAllowed},
		{name: "counts a rule of every resource as taking Secrets",
			req: relabel, moves: []Move{{Target: prod, Joins: true, Resources: []schema.GroupResource{{Resource: "*"}}}}, reason: ReasonPlaintextSecret,
			says: []string{"its objects of secrets into"}},
		{name: "counts the target's own sensitive resources",
			req: relabel, moves: []Move{{Target: sealing, Joins: true, Resources: []schema.GroupResource{{Group: "bitnami.com", Resource: "sealedsecrets"}}}},
			reason: ReasonPlaintextSecret, says: []string{"sealedsecrets.bitnami.com"}},
		{name: "counts the operator's sensitive resources under a rule of every group",
			req: relabel, moves: []Move{{Target: prod, Joins: true, Resources: []schema.GroupResource{{Group: "*", Resource: "vaultsecrets"}}}},
			sensitive: []schema.GroupResource{vault}, reason: ReasonPlaintextSecret, says: []string{"vaultsecrets.vault.example.com"}},
		{name: "refuses new labels that bring a namespace's objects into a Stalled target",
			req: relabel, moves: []Move{{Target: stalled, Joins: true, Resources: configMaps}}, reason: ReasonTargetStalled,
			says: []string{"bring its objects of configmaps into the rules of GitTarget ops/prod (https://git.example.com/r.git branch main, folder live)",
				"live/run.sh is not a YAML manifest", "Retry once GitTarget ops/prod is Ready again"}},
		{name: "refuses new labels that take a namespace's objects out of a Stalled target",
			req: relabel, moves: []Move{{Target: stalled, Resources: configMaps}}, reason: ReasonTargetStalled,
			says: []string{"take its objects of configmaps out of", "spec.prune.mode: Never"}},
		{name: "lets new labels take objects out of a Stalled target that keeps every document",
			req: relabel, moves: []Move{{Target: keeping, Resources: configMaps}}, reason: ReasonAllowed},
		{name: "names a rule of every resource as it is written",
			req: relabel, moves: []Move{{Target: stalled, Joins: true, Resources: []schema.GroupResource{{Group: "*", Resource: "*"}}}}, reason: ReasonTargetStalled,
			says: []string{`its objects of "*.*" into`}},
		{name: "lets the cluster's own controllers relabel through a Stalled target",
			req: byCluster, moves: []Move{{Target: stalled, Joins: true, Resources: configMaps}}, reason: ReasonAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := DecideRelabel(tc.req, tc.moves, tc.sensitive)
			assert.Equal(t, tc.reason, v.Reason)
			assert.Equal(t, tc.reason == ReasonAllowed, v.Allowed)
			for _, s := range tc.says {
				assert.Contains(t, v.Message, s)
			}
		})
	}
}
