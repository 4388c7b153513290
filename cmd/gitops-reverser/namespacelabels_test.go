package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gitops-reverser/gitops-reverser/watcher"
)

// answering is an API server read that gives err for every namespace. A fake: a real API
// server cannot be made to time out or throttle on cue here.
type answering struct {
	client.Reader
	err error
}

func (a answering) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return a.err
}

func TestNamespaceLabels(t *testing.T) {
	team := labels.Set{"team": "a"}
	live := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: labels.Set{"team": "live"}}}
	cached := fake.NewClientBuilder().WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cached", Labels: team}}).Build()
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "team-a")
	tooMany := apierrors.NewTooManyRequests("slow down", 1)
	for _, tc := range []struct {
		name      string
		live      client.Reader
		ns        string
		remembers bool
		want      labels.Set
	}{
		{"reads a cached namespace's labels from the cache", answering{err: tooMany}, "cached", true, team},
		{"asks the API server for a namespace the cache has not seen", fake.NewClientBuilder().WithObjects(live).Build(), "team-a", true, live.Labels},
		{"gives a namespace deleted a moment ago the labels it had", answering{err: notFound}, "team-a", true, team},
		{"gives a deleted namespace the labels it had when the API server cannot answer", answering{err: tooMany}, "team-a", true, team},
		{"knows nothing of a namespace it never saw when the API server cannot answer", answering{err: tooMany}, "team-a", false, nil},
		{"does not ask the API server when told not to", nil, "team-a", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deleted := watcher.NewDeletedNamespaces(time.Minute)
			if tc.remembers {
				deleted.Remember("team-a", team)
			}
			assert.Equal(t, tc.want, namespaceLabels(cached, tc.live, deleted)(tc.ns))
		})
	}
}
