package watcher

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// listedInformer is a real shared informer over a fixed list: Current reads only the
// informer's cache, so the list stands in for the API server (envtest suites cover the
// watch itself). Unstarted, it has not synced.
func listedInformer(t *testing.T, started bool, objs ...*unstructured.Unstructured) *informer {
	t.Helper()
	i := watchedInformer(t, watch.NewFake(), objs...)
	if started {
		go i.inf.Run(i.ctx.Done())
		require.Eventually(t, i.inf.HasSynced, 10*time.Second, 10*time.Millisecond)
	}
	return i
}

// watchedInformer is an informer over a fixed list, as listedInformer, not started, whose
// watch is events: the test sends the API server's changes.
func watchedInformer(t *testing.T, events *watch.FakeWatcher, objs ...*unstructured.Unstructured) *informer {
	t.Helper()
	lw := &cache.ListWatch{
		ListFunc: func(metav1.ListOptions) (runtime.Object, error) {
			list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMapList"}}
			list.SetResourceVersion("1")
			for _, o := range objs {
				list.Items = append(list.Items, *o.DeepCopy())
			}
			return list, nil
		},
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return events, nil },
	}
	inf := cache.NewSharedIndexInformer(listOnly{lw}, &unstructured.Unstructured{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &informer{inf: inf, ctx: ctx, cancel: cancel}
}

// listOnly tells the reflector to list, not to stream the list through a watch: the fixed
// list has no watch that could.
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

func configMap(ns, name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

// atVersion is key at another version of its resource.
func atVersion(version string, key batch.ObjectKey) batch.ObjectKey {
	key.GVR.Version = version
	return key
}

func TestCurrent(t *testing.T) {
	target := types.NamespacedName{Namespace: "team-a", Name: "live"}
	other := types.NamespacedName{Namespace: "team-b", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cms := Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true}
	team := labels.SelectorFromSet(labels.Set{"team": "a"})
	claim := func(t types.NamespacedName, sel labels.Selector) Claim {
		return Claim{Target: t, Resource: cms, Namespace: t.Namespace, ObjectSelector: sel, Create: true, Update: true, Delete: true}
	}
	key := func(ns, name string) batch.ObjectKey {
		return batch.ObjectKey{GVR: gvr, Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	listed := []*unstructured.Unstructured{
		configMap("team-a", "app", map[string]string{"team": "a"}),
		configMap("team-a", "relabelled", map[string]string{"team": "b"}),
		configMap("brand-new", "app", map[string]string{"team": "a"}),
		configMap("team-a", "kube-root-ca.crt", map[string]string{"team": "a"}),
	}
	bySelector := Claim{Target: target, Resource: cms, NamespaceSelector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	known := func(ns string) bool { return ns != "brand-new" }
	tests := []struct {
		name     string
		claims   []Claim
		informer string // "synced", "unsynced" or "" for none yet
		key      batch.ObjectKey
		want     string // the object's name; "" for none
		wantErr  error
	}{
		{name: "returns the object a claim of the target selects",
			claims: []Claim{claim(target, team)}, informer: "synced", key: key("team-a", "app"), want: "app"},
		{name: "answers nothing for an object the synced cache does not have: it was deleted",
			claims: []Claim{claim(target, team)}, informer: "synced", key: key("team-a", "gone")},
		{name: "says no claim selects an object that is noise (kube-root-ca.crt), not that it is gone",
			claims: []Claim{claim(target, team)}, informer: "synced", key: key("team-a", "kube-root-ca.crt"), wantErr: batch.ErrNotSelected},
		{name: "says no claim selects an object whose labels changed",
			claims: []Claim{claim(target, team)}, informer: "synced", key: key("team-a", "relabelled"), wantErr: batch.ErrNotSelected},
		{name: "says the resource is not watched when only another target's rule covers it",
			claims: []Claim{claim(other, labels.Everything())}, informer: "synced", key: key("team-a", "app"), wantErr: batch.ErrNotWatched},
		{name: "says the resource is not watched in a namespace no rule of the target covers",
			claims: []Claim{claim(target, team)}, informer: "synced", key: key("team-c", "app"), wantErr: batch.ErrNotWatched},
		{name: "fails transiently while the covering informer has not synced, so a waiting deletion is not taken for one",
			claims: []Claim{claim(target, team)}, informer: "unsynced", key: key("team-a", "gone"), wantErr: batch.ErrNotSynced},
		{name: "fails transiently while a rule's informer is not there yet",
			claims: []Claim{claim(target, team)}, key: key("team-a", "app"), wantErr: batch.ErrNotSynced},
		{name: "fails transiently for an object a namespaceSelector may select in a namespace the cache has not seen yet",
			claims: []Claim{bySelector}, informer: "synced", key: key("brand-new", "app"), wantErr: batch.ErrNotSynced},
		{name: "says no claim selects an object in a known namespace the namespaceSelector does not select",
			claims: []Claim{bySelector}, informer: "synced", key: key("team-a", "app"), wantErr: batch.ErrNotSelected},
		{name: "answers nothing for an object deleted while its resource came to be served at another version",
			claims: []Claim{claim(target, team)}, informer: "synced", key: atVersion("v0", key("team-a", "gone"))},
		{name: "answers nothing for an object deleted in a namespace only the rule already at the new version covers",
			claims: []Claim{claim(target, team), {Target: target, Resource: Resource{GVR: atVersion("v0", key("", "")).GVR, Kind: "ConfigMap", Namespaced: true},
				Namespace: "team-c", ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}},
			informer: "synced", key: atVersion("v0", key("team-a", "gone"))},
		{name: "returns the object as the version its rules watch now shows it",
			claims: []Claim{claim(target, team)}, informer: "synced", key: atVersion("v0", key("team-a", "app")), want: "app"},
		{name: "answers nothing, not a wait, for an object gone from a namespace the cache has not seen",
			claims: []Claim{bySelector}, informer: "synced", key: key("brand-new", "gone")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(Options{Sink: &snapshots{}, Log: logr.Discard(), NamespaceKnown: known})
			w.rules = map[string][]Claim{"rule": tt.claims}
			w.rebuildLocked()
			if tt.informer != "" {
				w.informers[gvr] = listedInformer(t, tt.informer == "synced", listed...)
			}
			got, err := w.Current(target, tt.key)
			if tt.wantErr == nil {
				// What a Holder answers cheaply agrees: an object it holds is never taken for gone.
				assert.Equal(t, tt.want != "", w.Holds(target, tt.key), "Holds")
			}
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tt.want, got.GetName())
			got.SetName("changed")
			again, err := w.Current(target, tt.key)
			require.NoError(t, err)
			assert.Equal(t, tt.want, again.GetName(), "a copy: the caller cannot change the cache")
		})
	}
}
