package main

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// notices turns the writer's "look at this object again" callbacks into controller events
// without blocking the writer (it calls them under its locks) and without dropping one: a
// CommitRequest's controller looks again on its own only at the request's deadline, so a
// notice lost in a burst would leave a settled outcome out of status until then. While the
// channel is full, keys wait in a set (one per object, however many notices) and one
// goroutine hands them on until ctx ends.
type notices[T client.Object] struct {
	ctx     context.Context
	ch      chan<- event.TypedGenericEvent[T]
	empty   func() T
	mu      sync.Mutex
	waiting map[types.NamespacedName]bool
	pumping bool
}

// notifier returns the callback of a notices for ch; empty makes the object an event names.
func notifier[T client.Object](ctx context.Context, ch chan<- event.TypedGenericEvent[T], empty func() T) func(types.NamespacedName) {
	n := &notices[T]{ctx: ctx, ch: ch, empty: empty, waiting: map[types.NamespacedName]bool{}}
	return n.notify
}

// notify hands k on at once, or leaves it to the pump while the channel is full.
func (n *notices[T]) notify(k types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.pumping {
		select {
		case n.ch <- n.event(k):
			return
		default:
		}
	}
	n.waiting[k] = true
	if !n.pumping {
		n.pumping = true
		go n.pump()
	}
}

// pump hands on the waiting keys, blocking on the channel, until none waits or ctx ends.
func (n *notices[T]) pump() {
	for {
		n.mu.Lock()
		k, found := types.NamespacedName{}, false
		for key := range n.waiting {
			k, found = key, true
			delete(n.waiting, key)
			break
		}
		if !found {
			n.pumping = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		select {
		case n.ch <- n.event(k):
		case <-n.ctx.Done():
			return
		}
	}
}

func (n *notices[T]) event(k types.NamespacedName) event.TypedGenericEvent[T] {
	obj := n.empty()
	obj.SetNamespace(k.Namespace)
	obj.SetName(k.Name)
	return event.TypedGenericEvent[T]{Object: obj}
}
