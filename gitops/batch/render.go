package batch

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// renderAhead is the fewest new objects a plan renders on every core before it plans its
// keys one by one: writing a new object's YAML and reading it back is most of its cost,
// and an initial snapshot's 10,000 files took 1.5 s of one core that way.
const renderAhead = 256

// rendered is a new object's file made ahead of the plan (renderNew): the object as the
// plan reads it, and the file it makes on its own.
type rendered struct {
	obj    *unstructured.Unstructured
	edited manifest.Edited
	err    error
}

// renderNew renders, on every core, the files of the window's objects the folder does not
// hold yet, when there are renderAhead of them. planOne takes such an object, and its
// file when it writes it to a file of its own; everything else it plans as before, and
// an object the cluster does not give plainly (an error, gone) or a sensitive one is left
// to it, so no plaintext of a secret is rendered. Callers hold w.mu.
func (w *worker) renderNew(ctx context.Context, t *target, keys []ObjectKey) map[ObjectKey]rendered {
	ix := t.index.Load()
	cores := runtime.GOMAXPROCS(0)
	if ix == nil || cores < 2 || len(keys) < renderAhead {
		return nil
	}
	var fresh []ObjectKey
	for _, k := range keys {
		if _, held := ix.lookup(k.Identity()); !held && !w.isSensitive(t, k.GVR.GroupResource()) {
			fresh = append(fresh, k)
		}
	}
	if len(fresh) < renderAhead {
		return nil
	}
	out := make([]rendered, len(fresh))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cores {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(fresh) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				out[i] = w.renderOne(t, fresh[i])
			}
		})
	}
	wg.Wait()
	ahead := make(map[ObjectKey]rendered, len(fresh))
	for i, k := range fresh {
		if out[i].obj != nil {
			ahead[k] = out[i]
		}
	}
	return ahead
}

// renderOne is k's object and the file it makes alone, or nothing when planOne is to read
// it itself.
func (w *worker) renderOne(t *target, k ObjectKey) rendered {
	obj, err := w.opts.Resolver.Current(t.spec.Key, k)
	if err != nil || obj == nil || URLCredentialsProblem(k.GVR.GroupResource(), obj) != "" {
		return rendered{}
	}
	edited, err := manifest.UpsertIndexed(nil, w.forms(obj, false).writable(obj, nil), t.style)
	return rendered{obj: obj, edited: edited, err: err}
}
