package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

	cm := Request{Operation: Create, Resource: schema.GroupResource{Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "team-a", Name: "app"}
	secret := Request{Operation: Create, Resource: schema.GroupResource{Resource: "secrets"}, Kind: "Secret", Namespace: "team-a", Name: "db"}
	delSecret := secret
	delSecret.Operation = Delete
	role := Request{Operation: Update, Resource: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, Kind: "ClusterRole", Name: "admin"}

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
			contains: []string{"ConfigMap team-a/app cannot be mirrored", "GitTarget team-a/live", "folder live", "live/run.sh"}},
		{name: "denies a Secret when the target cannot encrypt, saying what to configure", req: secret, targets: []TargetState{live}, sensitive: true, reason: ReasonPlaintextSecret,
			contains: []string{"Secret team-a/db would be stored in plaintext", "configure encryption on GitTarget team-a/live"}},
		{name: "allows a Secret when the target can encrypt", req: secret, targets: []TargetState{encrypted}, sensitive: true, allowed: true, reason: ReasonAllowed},
		{name: "allows deleting a Secret even without encryption", req: delSecret, targets: []TargetState{live}, sensitive: true, allowed: true, reason: ReasonAllowed},
		{name: "denies deleting when the folder cannot be written", req: delSecret, targets: []TargetState{stalled}, sensitive: true, reason: ReasonTargetStalled},
		{name: "denies a path held by a different object", req: cm, targets: []TargetState{clash}, reason: ReasonPathConflict,
			contains: []string{"already holds ConfigMap team-a/other"}},
		{name: "denies when any one of several targets cannot write", req: cm, targets: []TargetState{live, stalled}, reason: ReasonTargetStalled},
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
