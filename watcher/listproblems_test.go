package watcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func TestListProblem(t *testing.T) {
	gadgets := schema.GroupResource{Group: "example.com", Resource: "gadgets"}
	forbidden := &listError{msg: "gadgets.example.com is forbidden"}
	cases := []struct {
		name  string
		last  *listError
		tried time.Duration
		says  string
	}{
		{name: "says nothing of a first list still within its patience", tried: 59 * time.Second},
		{name: "quotes the error of a resource that could not be listed", last: forbidden, tried: 5 * time.Second,
			says: "gadgets.example.com cannot be listed: gadgets.example.com is forbidden"},
		{name: "reports a first list that has not finished after a minute, without an error", tried: 61500 * time.Millisecond,
			says: "gadgets.example.com has not finished its first list in over a minute (an API server streaming"},
		{name: "names the last error of a list tried for over a minute, which may be held since", last: forbidden, tried: 3 * time.Minute,
			says: "gadgets.example.com has not finished its first list in over a minute; its last error: gadgets.example.com is forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := listProblem(gadgets, tc.last, tc.tried)
			if tc.says == "" {
				assert.Empty(t, got)
				return
			}
			assert.True(t, strings.HasPrefix(got, tc.says), got)
			if tc.tried >= listPatience {
				assert.Equal(t, got, listProblem(gadgets, tc.last, tc.tried+time.Hour), "the same words at every later look")
			}
		})
	}
}

func TestAListErrorQuotesItsURLWithoutTheQuery(t *testing.T) {
	err := fmt.Errorf("failed to watch: %w", &url.Error{Op: "Get", URL: "https://10.0.0.1/apis/example.com/v1/gadgets?timeoutSeconds=331&watch=true",
		Err: errors.New("connection refused")})
	assert.Equal(t, `failed to watch: Get "https://10.0.0.1/apis/example.com/v1/gadgets": connection refused`, listErrorMessage(err))
}

func TestTheErrorsThatEndAWatchInTheNormalCourseAreNoListProblem(t *testing.T) {
	for _, err := range []error{io.EOF, io.ErrUnexpectedEOF, apierrors.NewResourceExpired("too old"), apierrors.NewGone("gone")} {
		i := listedInformer(t, false)
		i.noteListError(err)
		assert.Nil(t, i.listErr.Load(), "%v", err)
	}
	i := listedInformer(t, false)
	i.noteListError(fmt.Errorf("failed to list: %w", errors.New("connection refused")))
	require.NotNil(t, i.listErr.Load())
	assert.Equal(t, "failed to list: connection refused", i.listErr.Load().msg)
}

// A resource whose list the API server refuses is reported with the reason, once the
// reflector has tried; one that lists is not. The list-watches stand in for the API server
// (this package's tests run none); the e2e suite sees a real one hold a list.
func TestAResourceThatCannotBeListedIsAListProblem(t *testing.T) {
	gadgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	w := New(Options{Sink: &snapshots{}, Log: logr.Discard()})
	w.informers[gadgets] = runningInformer(t, func() (runtime.Object, error) {
		return nil, apierrors.NewForbidden(gadgets.GroupResource(), "", errors.New(`User "reverser" cannot list resource "gadgets"`))
	})
	w.informers[configmaps] = runningInformer(t, func() (runtime.Object, error) {
		list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMapList"}}
		list.SetResourceVersion("1")
		return list, nil
	})

	var problems []string
	require.Eventually(t, func() bool {
		var pending bool
		problems, pending = w.ListProblems([]schema.GroupVersionResource{gadgets, configmaps})
		return len(problems) == 1 && !pending
	}, 10*time.Second, 10*time.Millisecond, "configmaps listed, gadgets refused")
	assert.Contains(t, problems[0], `gadgets.example.com cannot be listed: `)
	assert.Contains(t, problems[0], `cannot list resource "gadgets"`)
}

// runningInformer runs an informer whose list is list, with its errors recorded as the
// watcher's are.
func runningInformer(t *testing.T, list func() (runtime.Object, error)) *informer {
	t.Helper()
	lw := &cache.ListWatch{
		ListFunc:  func(metav1.ListOptions) (runtime.Object, error) { return list() },
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	i := &informer{inf: cache.NewSharedIndexInformer(listOnly{lw}, &unstructured.Unstructured{}, 0, cache.Indexers{}),
		ctx: ctx, cancel: cancel, started: time.Now()}
	i.recordListErrors()
	go i.inf.RunWithContext(ctx)
	return i
}

// flakyList is the list and watch of one resource that a test breaks and mends: while
// broken, every list and watch is forbidden (the operator's permission taken away).
type flakyList struct {
	broken atomic.Bool
	mu     sync.Mutex
	watch  *watch.FakeWatcher
}

// listWatch is i's list and watch (informer.listWatch, as the watcher builds it) over f, each
// list returning objs at resource version 1, as a quiet resource's does every time.
func (f *flakyList) listWatch(i *informer, objs ...*unstructured.Unstructured) cache.ListerWatcher {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("RBAC: access denied"))
	return listOnly{i.listWatch(func(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
		if f.broken.Load() {
			return nil, forbidden
		}
		list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMapList"}}
		list.SetResourceVersion("1")
		for _, o := range objs {
			list.Items = append(list.Items, *o.DeepCopy())
		}
		return list, nil
	}, func(context.Context, metav1.ListOptions) (watch.Interface, error) {
		if f.broken.Load() {
			return nil, forbidden
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.watch = watch.NewFake()
		return f.watch, nil
	}, func() {})}
}

// breakWatch ends the current watch and fails every list and watch from now on.
func (f *flakyList) breakWatch() {
	f.broken.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watch != nil {
		f.watch.Stop()
	}
}

// The API server cannot be made to fail a re-list on cue, so the list and watch are faked
// here; the real API server's failing first list is in the e2e suite
// (TestAResourceThatCannotBeListedSaysSoOnItsRule).
func TestAResourceWhoseRelistKeepsFailingIsNotTakenForComplete(t *testing.T) {
	target := types.NamespacedName{Namespace: "ops", Name: "live"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	claim := Claim{Target: target, Resource: Resource{GVR: gvr, Kind: "ConfigMap", Namespaced: true}, Namespace: "team-a",
		ObjectSelector: labels.Everything(), Create: true, Update: true, Delete: true}
	key := batch.ObjectKey{GVR: gvr, Kind: "ConfigMap", Namespace: "team-a", Name: "app"}
	lists := &flakyList{}
	inf := &informer{}
	inf.inf = cache.NewSharedIndexInformer(lists.listWatch(inf, configMap("team-a", "app", nil)), &unstructured.Unstructured{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	inf.ctx, inf.cancel = context.WithCancel(context.Background())
	t.Cleanup(inf.cancel)
	inf.recordListErrors()
	sink := &lockedSnapshots{}
	w := New(Options{Sink: sink, Log: logr.Discard()})
	w.informers[gvr] = inf
	w.byGVR[gvr] = []Claim{claim}
	w.rules = map[string][]Claim{"rule": {claim}}
	close(w.started)
	go inf.inf.Run(inf.ctx.Done())
	require.Eventually(t, inf.inf.HasSynced, 10*time.Second, 10*time.Millisecond)
	_, err := w.Current(target, key)
	require.NoError(t, err, "synced: the cache is the cluster's state")

	lists.breakWatch()
	require.Eventually(t, inf.failingRelist, 10*time.Second, 10*time.Millisecond)
	assert.True(t, inf.inf.HasSynced(), "client-go still says synced")
	_, err = w.Current(target, key)
	assert.ErrorIs(t, err, batch.ErrNotSynced, "a frozen store is not the cluster's state: absence there is no deletion")
	problems, _ := w.ListProblems([]schema.GroupVersionResource{gvr})
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "configmaps cannot be listed or watched again since its watch broke")
	assert.Contains(t, problems[0], "RBAC: access denied")
	w.Resync(target)
	time.Sleep(300 * time.Millisecond) // an absence has no signal
	assert.Empty(t, sink.snapshots(), "nothing is compared with Git, or pruned, from the frozen store")

	lists.broken.Store(false) // the permission is back: the next list comes in, at the same resource version
	require.Eventually(t, func() bool { return len(sink.snapshots()) == 1 }, 30*time.Second, 20*time.Millisecond,
		"the waiting comparison is made once a list is in")
	assert.False(t, inf.failingRelist())
	_, err = w.Current(target, key)
	assert.NoError(t, err)
	problems, _ = w.ListProblems([]schema.GroupVersionResource{gvr})
	assert.Empty(t, problems)
}

// A streamed list (watch-list) is in once the API server's bookmark marking the end of the
// initial events has been passed on: the count moves then, not at an event before it.
func TestAStreamedListIsCountedAtTheEndOfItsInitialEvents(t *testing.T) {
	in := watch.NewFake()
	var listed atomic.Int32
	lw := newListEndWatch(in, func() { listed.Add(1) })
	go func() {
		in.Add(configMap("team-a", "app", nil))
		plain := configMap("", "", nil)
		in.Action(watch.Bookmark, plain)
		end := configMap("", "", nil)
		end.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		in.Action(watch.Bookmark, end)
	}()
	for range 3 {
		ev := <-lw.ResultChan()
		if ev.Type != watch.Bookmark || !initialEventsEnd(ev.Object) {
			assert.Zero(t, listed.Load(), "not before the end of the initial events")
		}
	}
	require.Eventually(t, func() bool { return listed.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	lw.Stop()
	lw.Stop() // twice, as a reflector and a cancelled context may
	_, open := <-lw.ResultChan()
	assert.False(t, open, "stopping closes the events")
}
