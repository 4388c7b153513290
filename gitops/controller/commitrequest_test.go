package controller_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
)

// retryingWriter answers every request as the writer does while the commit carrying its
// message keeps failing to push (batch's TestACommitRequestSaysWhyItsMessageIsNotCommittedYet
// causes that with a real remote); it stands in here so the controller's side can be
// checked in isolation, and records what it is told to forget.
type retryingWriter struct{ forgot []types.NamespacedName }

func (w *retryingWriter) Request(batch.CommitRequest) (batch.RequestOutcome, error) {
	return batch.RequestOutcome{Reason: batch.ReasonRetrying, Message: "push failed: remote unreachable; retried"}, nil
}

func (w *retryingWriter) Forget(k types.NamespacedName) { w.forgot = append(w.forgot, k) }

// alicesRelease creates GitTarget live in a new namespace and alice's CommitRequest
// "release 1.2" on it.
func alicesRelease(t *testing.T) *v1alpha1.CommitRequest {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, target(ns, "main", "live")))
	cr := &v1alpha1.CommitRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "release"}, Spec: v1alpha1.CommitRequestSpec{
		TargetRef: v1alpha1.LocalObjectReference{Name: "live"}, Message: "release 1.2",
		Requester: &v1alpha1.Requester{Username: "alice"}}}
	require.NoError(t, k8s.Create(ctx, cr))
	return cr
}

func TestACommitRequestWhoseCommitIsRetriedStaysWithItsWindow(t *testing.T) {
	ctx := context.Background()
	cr := alicesRelease(t)
	w := &retryingWriter{}
	r := &controller.CommitRequestReconciler{Client: k8s, Writer: w}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)}

	for range 2 { // the second is what the status patch's own event brings
		_, err := r.Reconcile(ctx, req)
		require.NoError(t, err)
	}

	assert.Empty(t, w.forgot, "a retried commit still carries the message: the request must stay attached")
	require.NoError(t, k8s.Get(ctx, req.NamespacedName, cr))
	c := apimeta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionCommitted)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, batch.ReasonRetrying, c.Reason)
	assert.False(t, controller.Settled(cr.Status.Conditions))
}

func TestSettled(t *testing.T) {
	committed := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionCommitted, Status: status, Reason: reason}}
	}
	tests := []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{name: "is not settled before any outcome", want: false},
		{name: "is not settled while waiting for the requester's change", conds: committed(metav1.ConditionFalse, v1alpha1.ReasonWaiting), want: false},
		{name: "is not settled while the commit carrying the message is retried", conds: committed(metav1.ConditionFalse, batch.ReasonRetrying), want: false},
		{name: "is settled once committed", conds: committed(metav1.ConditionTrue, "Committed"), want: true},
		{name: "is settled once the message was not used", conds: committed(metav1.ConditionFalse, batch.ReasonTimedOut), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, controller.Settled(tt.conds))
		})
	}
}

// answeringWriter answers every request with out and err: the writer's memory of a request
// whose GitTarget was deleted after the commit carrying its message was pushed takes a real
// writer, a remote and a deletion racing the status write; the controller's side of it is
// what is checked here.
type answeringWriter struct {
	out batch.RequestOutcome
	err error
}

func (w answeringWriter) Request(batch.CommitRequest) (batch.RequestOutcome, error) {
	return w.out, w.err
}
func (w answeringWriter) Forget(types.NamespacedName) {}

// reconcileRequest creates alice's CommitRequest name "release 1.2" on GitTarget target in
// ns (with timeout, when set), reconciles it once with w and returns its Committed condition.
func reconcileRequest(t *testing.T, ns, name, target string, timeout *metav1.Duration, w controller.Requests) metav1.Condition {
	t.Helper()
	ctx := context.Background()
	cr := &v1alpha1.CommitRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.CommitRequestSpec{
		TargetRef: v1alpha1.LocalObjectReference{Name: target}, Message: "release 1.2", Timeout: timeout,
		Requester: &v1alpha1.Requester{Username: "alice"}}}
	require.NoError(t, k8s.Create(ctx, cr))
	r := &controller.CommitRequestReconciler{Client: k8s, Writer: w}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
	require.NoError(t, err)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(cr), cr))
	c := apimeta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionCommitted)
	require.NotNil(t, c)
	return *c
}

func TestACommitRequestOfADeletedGitTarget(t *testing.T) {
	ns := namespace(t)
	reconcile := func(name string, w controller.Requests) metav1.Condition {
		return reconcileRequest(t, ns, name, "gone", nil, w)
	}
	t.Run("reports the commit that carried the message when the GitTarget was deleted after its push", func(t *testing.T) {
		c := reconcile("pushed", answeringWriter{out: batch.RequestOutcome{Done: true, Reason: batch.ReasonCommitted,
			SHA: "0123456789abcdef0123456789abcdef01234567", Message: "committed"}})
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, batch.ReasonCommitted, c.Reason, "not TargetNotFound: the message is in Git")
	})
	t.Run("says the GitTarget is not found when the writer never knew the request", func(t *testing.T) {
		c := reconcile("unknown", answeringWriter{err: batch.ErrTargetNotRegistered})
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, v1alpha1.ReasonTargetNotFound, c.Reason)
	})
}

// laggingCache reads through k8s, except that it does not show GitTargets yet, as the
// controller's cache right after a GitTarget and a CommitRequest were created in one apply
// (separate watches: either may come first). A stand-in: that lag cannot be caused on demand.
type laggingCache struct{ client.Client }

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.GitTarget); ok {
		return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("gittargets").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func TestACommitRequestWaitsForAGitTargetItsCacheDoesNotShowYet(t *testing.T) {
	ctx := context.Background()
	cr := alicesRelease(t)
	r := &controller.CommitRequestReconciler{Client: laggingCache{k8s}, APIReader: k8s, Writer: answeringWriter{err: batch.ErrTargetNotRegistered}}

	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
	require.NoError(t, err)

	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(cr), cr))
	c := apimeta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionCommitted)
	require.NotNil(t, c)
	assert.Equal(t, v1alpha1.ReasonWaiting, c.Reason, "not a final TargetNotFound: the GitTarget exists")
	assert.False(t, controller.Settled(cr.Status.Conditions))
}

func TestACommitRequestAnEarlierLeaderMayHaveCommittedOutlivesItsTimeout(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, target(ns, "main", "live")))
	reconcile := func(name string, w controller.Requests) metav1.Condition {
		return reconcileRequest(t, ns, name, "live", &metav1.Duration{}, w) // past its timeout at once
	}
	t.Run("waits while the new leader's writer has not looked on the branch", func(t *testing.T) {
		c := reconcile("recovering", answeringWriter{err: batch.ErrRecovering})
		assert.Equal(t, v1alpha1.ReasonWaiting, c.Reason, "not TimedOut: the message may be in Git")
	})
	t.Run("times out once the writer would have looked", func(t *testing.T) {
		c := reconcile("late", answeringWriter{err: batch.ErrTargetNotRegistered})
		assert.Equal(t, batch.ReasonTimedOut, c.Reason)
	})
}

func TestACommitRequestOfAGitTargetBeingDeletedEndsAtOnce(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	gt := target(ns, "main", "live")
	gt.Finalizers = []string{"test.example.com/keep"} // envtest has no garbage collector to wait for
	require.NoError(t, k8s.Create(ctx, gt))
	releaseWhenDone(t, gt)
	require.NoError(t, k8s.Delete(ctx, gt))

	c := reconcileRequest(t, ns, "deleting", "live", nil, answeringWriter{err: batch.ErrTargetNotRegistered})
	assert.Equal(t, batch.ReasonTargetRemoved, c.Reason, "not waiting out its timeout")
	assert.Contains(t, c.Message, "is being deleted")

}

func TestABlankCommitRequestMessageIsRefusedAtCreation(t *testing.T) {
	ns := namespace(t)
	cr := &v1alpha1.CommitRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blank"}, Spec: v1alpha1.CommitRequestSpec{
		TargetRef: v1alpha1.LocalObjectReference{Name: "live"}, Message: " \n\t\n"}}
	err := k8s.Create(context.Background(), cr)
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "message must not be blank")
}

// claimsWriter is retryingWriter that asks each request which commits other requests claim,
// as the writer's look at the branch after a restart does (batch's
// TestARequestIsNotAnsweredWithACommitAnotherRequestReports asks with a real remote).
type claimsWriter struct {
	retryingWriter
	claimed map[types.NamespacedName]batch.Claim
}

func (w *claimsWriter) Request(r batch.CommitRequest) (batch.RequestOutcome, error) {
	claimed, err := r.Claimed()
	if err != nil {
		return batch.RequestOutcome{}, err
	}
	w.claimed = claimed
	return w.retryingWriter.Request(r)
}

func TestACommitRequestTellsTheWriterTheCommitsItsTargetsOtherRequestsReport(t *testing.T) {
	ctx := context.Background()
	cr := alicesRelease(t)
	other := func(name, target, sha string, edit ...func(*v1alpha1.CommitRequest)) *v1alpha1.CommitRequest {
		o := &v1alpha1.CommitRequest{ObjectMeta: metav1.ObjectMeta{Namespace: cr.Namespace, Name: name}, Spec: v1alpha1.CommitRequestSpec{
			TargetRef: v1alpha1.LocalObjectReference{Name: target}, Message: "release 1.2\n",
			Requester: &v1alpha1.Requester{Username: "alice"}}}
		for _, e := range edit {
			e(o)
		}
		conds := o.Status.Conditions
		require.NoError(t, k8s.Create(ctx, o))
		o.Status.SHA, o.Status.Conditions = sha, conds
		require.NoError(t, k8s.Status().Update(ctx, o))
		return o
	}
	other("release-1", "live", "1111111111111111111111111111111111111111")
	other("release-elsewhere", "staging", "2222222222222222222222222222222222222222")
	waiting := other("release-waiting", "live", "") // may be the one a commit after its creation was made for
	other("release-timed-out", "live", "", func(o *v1alpha1.CommitRequest) {
		apimeta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionCommitted, Status: metav1.ConditionFalse,
			Reason: batch.ReasonTimedOut, Message: "no change came"})
	})
	// A window carries every request's message: the writer counts which copies of hers
	// each takes.
	other("notes", "live", "3333333333333333333333333333333333333333", func(o *v1alpha1.CommitRequest) { o.Spec.Message = "notes" })
	other("bobs", "live", "4444444444444444444444444444444444444444", func(o *v1alpha1.CommitRequest) { o.Spec.Requester.Username = "bob" })
	w := &claimsWriter{}
	r := &controller.CommitRequestReconciler{Client: k8s, Writer: w}

	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)})

	require.NoError(t, err)
	assert.Equal(t, map[types.NamespacedName]batch.Claim{
		{Namespace: cr.Namespace, Name: "release-1"}:       {SHA: "1111111111111111111111111111111111111111", Message: "release 1.2\n"},
		{Namespace: cr.Namespace, Name: "notes"}:           {SHA: "3333333333333333333333333333333333333333", Message: "notes"},
		{Namespace: cr.Namespace, Name: "release-waiting"}: {Message: "release 1.2\n", Created: waiting.CreationTimestamp.Time},
	}, w.claimed, "only its own target's requests by alice, by request, with their messages: the commits they report, and those not settled")
}
