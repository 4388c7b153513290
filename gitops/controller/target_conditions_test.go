package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/layout"
)

func TestPlaceProblem(t *testing.T) {
	provider := &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "origin"},
		Spec: v1alpha1.GitProviderSpec{AllowedBranches: []string{"main", "env/*"}}}
	target := func(branch, path string) *v1alpha1.GitTarget {
		return &v1alpha1.GitTarget{Spec: v1alpha1.GitTargetSpec{Branch: branch, Path: path}}
	}
	cases := []struct {
		name       string
		t          *v1alpha1.GitTarget
		wantReason string
		wantIn     string
	}{
		{"lets a target write to an allowed branch and a plain folder", target("main", "live"), "", ""},
		{"lets a branch match a pattern of allowedBranches", target("env/prod", "live"), "", ""},
		{"refuses a branch Git would not take, stored before the CRD's rules said so", target("main..x", "live"),
			v1alpha1.ReasonBranchNotAllowed, `branch "main..x" is not a valid Git branch name`},
		{"refuses a folder that climbs out of the repository", target("main", "../live"),
			v1alpha1.ReasonPathNotAllowed, "spec.path: "},
		{"refuses a branch its GitProvider does not allow, naming the provider and its patterns", target("dev", "live"),
			v1alpha1.ReasonBranchNotAllowed, "GitProvider team-a/origin allowedBranches [main env/*]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := placeProblem(tc.t, provider)
			assert.Equal(t, tc.wantReason, reason)
			assert.Contains(t, msg, tc.wantIn)
		})
	}
}

func TestAllowedBranchesProblem(t *testing.T) {
	provider := func(patterns ...string) *v1alpha1.GitProvider {
		return &v1alpha1.GitProvider{Spec: v1alpha1.GitProviderSpec{AllowedBranches: patterns}}
	}
	assert.NoError(t, AllowedBranchesProblem([]string{"main", "env/*", "release-[0-9]*", `a\*`}))
	assert.EqualError(t, AllowedBranchesProblem([]string{"main", "release-[0-9"}),
		`spec.allowedBranches: "release-[0-9" is not a valid pattern (path.Match syntax: *, ?, [a-z], \ to escape; a [ needs its ])`)
	assert.ErrorContains(t, AllowedBranchesProblem([]string{"[", `x\`}), `"[", "x\\" are not valid patterns`)
	reason, msg := placeProblem(&v1alpha1.GitTarget{Spec: v1alpha1.GitTargetSpec{Branch: "release-1", Path: "live"}}, provider("release-[0-9"))
	assert.Equal(t, v1alpha1.ReasonBranchNotAllowed, reason)
	assert.Contains(t, msg, `(spec.allowedBranches: "release-[0-9" is not a valid pattern`, "says why the pattern that looks like it matches does not")
}

func TestSetWriterConditions(t *testing.T) {
	unsupported := layout.Verdict{Folder: "live", File: "live/run.sh", Reason: "is executable", Fix: "clear its executable bit"}
	cases := []struct {
		name               string
		st                 batch.TargetStatus
		want               string // the condition that is True: Ready, Reconciling or Stalled
		wantReason, wantIn string
		folderReady        metav1.ConditionStatus
	}{
		{"stalls a target whose folder cannot be written, and says it tries again on its own",
			batch.TargetStatus{Verdict: unsupported}, v1alpha1.ConditionStalled, v1alpha1.ReasonUnsupportedContent,
			"tries again on its own once Git changes", metav1.ConditionFalse},
		{"keeps a target whose last write failed reconciling, with the failure",
			batch.TargetStatus{Verdict: layout.Verdict{Supported: true}, LastError: "pushing: remote hung up"},
			v1alpha1.ConditionReconciling, v1alpha1.ReasonWriteFailed, "last write failed, retrying: pushing: remote hung up", metav1.ConditionTrue},
		{"makes a writing target Ready, naming where it writes without the URL's credentials",
			batch.TargetStatus{Verdict: layout.Verdict{Supported: true}},
			v1alpha1.ConditionReady, v1alpha1.ReasonSucceeded, "writing to https://git.example/r.git branch main folder live", metav1.ConditionTrue},
		{"makes a target that refuses some objects Ready, saying which",
			batch.TargetStatus{Verdict: layout.Verdict{Supported: true}, Refused: []string{"Secret app/db: not written: no encryption"}},
			v1alpha1.ConditionReady, v1alpha1.ReasonObjectsRefused, "1 object(s) not written: Secret app/db", metav1.ConditionTrue},
		{"keeps a target whose template failed at its last commit Ready, saying the default message was used",
			batch.TargetStatus{Verdict: layout.Verdict{Supported: true}, MessageFallback: "the last commit's message template failed, so it has the default message: index out of range"},
			v1alpha1.ConditionReady, v1alpha1.ReasonSucceeded, "folder live; the last commit's message template failed, so it has the default message: index out of range", metav1.ConditionTrue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tgt := &v1alpha1.GitTarget{Spec: v1alpha1.GitTargetSpec{Branch: "main", Path: "live"}}
			tgt.Generation = 3
			setWriterConditions(tgt, tc.st, "https://user:token@git.example/r.git")
			c := apimeta.FindStatusCondition(tgt.Status.Conditions, tc.want)
			if assert.NotNil(t, c) {
				assert.Equal(t, tc.wantReason, c.Reason)
				assert.Contains(t, c.Message, tc.wantIn)
				assert.NotContains(t, c.Message, "token")
				assert.Equal(t, int64(3), c.ObservedGeneration)
			}
			assert.True(t, apimeta.IsStatusConditionTrue(tgt.Status.Conditions, tc.want))
			folder := apimeta.FindStatusCondition(tgt.Status.Conditions, v1alpha1.ConditionFolderReady)
			if assert.NotNil(t, folder) {
				assert.Equal(t, tc.folderReady, folder.Status)
			}
		})
	}
}

func TestSetUnreachable(t *testing.T) {
	unsupported := layout.Verdict{Folder: "live", File: "live/run.sh", Reason: "is executable", Fix: "clear its executable bit"}
	stalled := func(tgt *v1alpha1.GitTarget) {
		v1alpha1.SetStalled(&tgt.Status.Conditions, tgt.Generation, v1alpha1.ReasonUnsupportedContent, "live/run.sh is executable")
	}
	cases := []struct {
		name       string
		before     func(*v1alpha1.GitTarget)
		st         batch.TargetStatus
		want       string // the condition that is True
		wantReason string
	}{
		{"keeps a folder the writer still cannot write Stalled when only Git could not be reached",
			stalled, batch.TargetStatus{Known: true, Verdict: unsupported}, v1alpha1.ConditionStalled, v1alpha1.ReasonUnsupportedContent},
		{"stalls a folder the writer knows it cannot write, though Git could not be reached now",
			nil, batch.TargetStatus{Known: true, Verdict: unsupported}, v1alpha1.ConditionStalled, v1alpha1.ReasonUnsupportedContent},
		{"keeps a Stalled folder when the writer could not look at all (another push held the branch)",
			stalled, batch.TargetStatus{}, v1alpha1.ConditionStalled, v1alpha1.ReasonUnsupportedContent},
		{"ends a credentials grace recorded beside a Stalled folder once the credentials were usable",
			func(tgt *v1alpha1.GitTarget) {
				stalled(tgt)
				setCredentialsGrace(tgt, "GitProvider team-a/repo: Secret team-a/creds not found")
			}, batch.TargetStatus{}, v1alpha1.ConditionStalled, v1alpha1.ReasonUnsupportedContent},
		{"reports a writable folder whose branch could not be fetched as Reconciling",
			stalled, batch.TargetStatus{Known: true, Verdict: layout.Verdict{Supported: true}}, v1alpha1.ConditionReconciling, v1alpha1.ReasonUnreachable},
		{"reports a target that never read its branch as Reconciling",
			nil, batch.TargetStatus{}, v1alpha1.ConditionReconciling, v1alpha1.ReasonUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tgt := &v1alpha1.GitTarget{Spec: v1alpha1.GitTargetSpec{Branch: "main", Path: "live"}}
			tgt.Generation = 3
			if tc.before != nil {
				tc.before(tgt)
			}
			setUnreachable(tgt, tc.st, "https://user:token@git.example/r.git", errors.New("fetch main: 503"))
			c := apimeta.FindStatusCondition(tgt.Status.Conditions, tc.want)
			if assert.NotNil(t, c) {
				assert.Equal(t, metav1.ConditionTrue, c.Status)
				assert.Equal(t, tc.wantReason, c.Reason)
				assert.NotContains(t, c.Message, "token")
			}
			if tc.want == v1alpha1.ConditionStalled {
				assert.Nil(t, apimeta.FindStatusCondition(tgt.Status.Conditions, v1alpha1.ConditionReconciling), "Stalled alone")
			}
		})
	}
}
