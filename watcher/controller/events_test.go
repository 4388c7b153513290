package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitops-reverser/gitops-reverser/watcher"
)

func TestCRDClockRecheck(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		changes []time.Duration // after at
		now     time.Duration
		res     ctrl.Result
		want    ctrl.Result
	}{
		{"asks nothing before any CRD changed", nil, 0, ctrl.Result{}, ctrl.Result{}},
		{"looks again once discovery had time to catch up", []time.Duration{0}, time.Second, ctrl.Result{}, ctrl.Result{RequeueAfter: 4 * time.Second}},
		{"counts from the last change of a burst", []time.Duration{0, 3 * time.Second}, 4 * time.Second, ctrl.Result{}, ctrl.Result{RequeueAfter: 4 * time.Second}},
		{"keeps a sooner requeue the rule asked for", []time.Duration{0}, time.Second, ctrl.Result{RequeueAfter: time.Second}, ctrl.Result{RequeueAfter: time.Second}},
		{"takes the sooner of the two", []time.Duration{0}, time.Second, ctrl.Result{RequeueAfter: 30 * time.Second}, ctrl.Result{RequeueAfter: 4 * time.Second}},
		{"asks nothing once the lag has passed", []time.Duration{0}, discoveryLag, ctrl.Result{}, ctrl.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c crdClock
			for _, d := range tc.changes {
				c.changed(at.Add(d))
			}
			assert.Equal(t, tc.want, c.recheck(tc.res, at.Add(tc.now)))
		})
	}
}

func TestNeedsRefresh(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	never := time.Time{}
	for _, tc := range []struct {
		name               string
		read, changed, now time.Time
		want               bool
	}{
		{"reads discovery the first time", never, never, at, true},
		{"serves a read of a moment ago", at, never, at.Add(time.Second), false},
		{"reads again once the answer is discoveryMaxAge old", at, never, at.Add(discoveryMaxAge), true},
		{"reads again when a CRD changed since", at, at.Add(time.Second), at.Add(2 * time.Second), true},
		{"serves a read made after the change until the API server had time to catch up", at.Add(time.Second), at, at.Add(3 * time.Second), false},
		{"reads again once that time has passed", at.Add(time.Second), at, at.Add(discoveryLag), true},
		{"serves a read made after that time", at.Add(discoveryLag), at, at.Add(discoveryLag + time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, needsRefresh(tc.read, tc.changed, tc.now))
		})
	}
}

func TestDropsAny(t *testing.T) {
	cms := watcher.Claim{Resource: watcher.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}
	metrics := watcher.Claim{Resource: watcher.Resource{GVR: schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}}}
	core := &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps"}, {Name: "secrets"}}}
	for _, tc := range []struct {
		name       string
		lists      []*metav1.APIResourceList
		failed     map[schema.GroupVersion]error
		registered []watcher.Claim
		want       bool
	}{
		{"drops nothing a rule never registered", []*metav1.APIResourceList{core}, nil, nil, false},
		{"drops nothing the answer still lists", []*metav1.APIResourceList{core}, nil, []watcher.Claim{cms}, false},
		{"drops nothing whose API fails: the rule keeps it anyway", []*metav1.APIResourceList{core},
			map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("503")}, []watcher.Claim{cms, metrics}, false},
		{"drops a registered resource the answer no longer lists", []*metav1.APIResourceList{core}, nil, []watcher.Claim{cms, metrics}, true},
		{"drops a resource listed only at another version", []*metav1.APIResourceList{{GroupVersion: "v2", APIResources: []metav1.APIResource{{Name: "configmaps"}}}},
			nil, []watcher.Claim{cms}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, dropsAny(tc.lists, tc.failed, tc.registered))
		})
	}
}
