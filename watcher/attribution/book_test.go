package attribution

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func cm(uid, rv, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "app", "namespace": "team-a", "uid": uid, "resourceVersion": rv,
			"managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"data": map[string]any{"k": value},
	}}
	return u
}

func TestJoin(t *testing.T) {
	alice := Author{Username: "alice"}
	tests := []struct {
		name   string
		record func(*Book)
		event  func() (Key, bool)
		want   *Author
	}{
		{
			name: "joins a create on the UID the webhook saw",
			record: func(b *Book) {
				k, _ := KeyForRequest(Create, cm("u1", "", "a"), nil)
				b.Record(k, alice)
			},
			event: func() (Key, bool) { return KeyForEvent(nil, cm("u1", "5", "a")) },
			want:  &alice,
		},
		{
			name: "joins an update on UID, replaced version and content, ignoring server bookkeeping",
			record: func(b *Book) {
				k, _ := KeyForRequest(Update, cm("u1", "5", "b"), cm("u1", "5", "a"))
				b.Record(k, alice)
			},
			event: func() (Key, bool) { return KeyForEvent(cm("u1", "5", "a"), cm("u1", "6", "b")) },
			want:  &alice,
		},
		{
			name: "does not attribute an update whose stored content differs from the admitted one",
			record: func(b *Book) {
				k, _ := KeyForRequest(Update, cm("u1", "5", "b"), cm("u1", "5", "a"))
				b.Record(k, alice)
			},
			event: func() (Key, bool) { return KeyForEvent(cm("u1", "5", "a"), cm("u1", "6", "c")) },
		},
		{
			name: "does not attribute an update that replaced another version",
			record: func(b *Book) {
				k, _ := KeyForRequest(Update, cm("u1", "5", "b"), cm("u1", "5", "a"))
				b.Record(k, alice)
			},
			event: func() (Key, bool) { return KeyForEvent(cm("u1", "7", "a"), cm("u1", "8", "b")) },
		},
		{
			name: "joins a delete on the UID",
			record: func(b *Book) {
				k, _ := KeyForRequest(Delete, nil, cm("u1", "5", "a"))
				b.Record(k, alice)
			},
			event: func() (Key, bool) { return DeleteKey("u1"), true },
			want:  &alice,
		},
		{
			name:   "leaves a change nobody recorded unattributed",
			record: func(*Book) {},
			event:  func() (Key, bool) { return KeyForEvent(nil, cm("u1", "5", "a")) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBook(0, 0)
			tt.record(b)
			k, ok := tt.event()
			require.True(t, ok)
			got, joined := b.Join(k)
			if tt.want == nil {
				assert.False(t, joined)
				return
			}
			assert.True(t, joined)
			assert.Equal(t, *tt.want, who(got))
			assert.WithinDuration(t, time.Now(), got.RecordedAt, time.Minute, "a join says when the request was recorded")
		})
	}
}

func TestBookBounds(t *testing.T) {
	t.Run("a record attributes one change only", func(t *testing.T) {
		b := NewBook(0, 0)
		b.Record(CreateKey("u1"), Author{Username: "alice"})
		_, ok := b.Join(CreateKey("u1"))
		assert.True(t, ok)
		_, ok = b.Join(CreateKey("u1"))
		assert.False(t, ok)
	})
	t.Run("records no key whose strings no API server sends, whatever a review posted to the webhook carries", func(t *testing.T) {
		b := NewBook(0, 0)
		huge := strings.Repeat("x", MaxKeyFieldBytes+1)
		b.Record(DeleteKey(types.UID(huge)), Author{Username: "alice"})
		b.Record(Key{Op: Update, UID: "u1", OldResourceVersion: huge}, Author{Username: "alice"})
		b.Record(Key{Op: Create, UID: "u2", APIVersion: huge}, Author{Username: "alice"})
		assert.Equal(t, 0, b.Len())
		b.Record(DeleteKey("6b1c7d3e-0000-4000-8000-000000000003"), Author{Username: "alice"})
		assert.Equal(t, 1, b.Len())
	})
	t.Run("forgets records older than the TTL", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := NewBook(time.Minute, 0)
		b.now = func() time.Time { return now }
		b.Record(CreateKey("u1"), Author{Username: "alice"})
		now = now.Add(2 * time.Minute)
		_, ok := b.Join(CreateKey("u1"))
		assert.False(t, ok)
		assert.Equal(t, 0, b.Len())
	})
	t.Run("does not join a record older than the change can be, and forgets it", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := NewBook(5*time.Minute, 0)
		b.now = func() time.Time { return now }
		b.Record(DeleteKey("u1"), Author{Username: "alice"}) // admitted, then refused by another admission step
		now = now.Add(time.Minute)
		_, ok := b.JoinWithin(DeleteKey("u1"), 30*time.Second) // bob's unrecorded delete, a minute later
		assert.False(t, ok, "alice's record is too old for a delete that followed its request at once")
		assert.Equal(t, 0, b.Len())
		b.Record(DeleteKey("u2"), Author{Username: "carol"})
		now = now.Add(time.Second)
		got, ok := b.JoinWithin(DeleteKey("u2"), 30*time.Second)
		assert.True(t, ok)
		assert.Equal(t, "carol", got.Username)
	})
	t.Run("joins a delete that waited for finalizers only to a record made when it was asked for", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := NewBook(5*time.Minute, 0)
		b.now = func() time.Time { return now }
		b.Record(DeleteKey("u1"), Author{Username: "alice"}) // admitted, then refused by another admission step
		now = now.Add(time.Minute)
		asked := now // bob's unrecorded delete: the object waits for its finalizer
		now = now.Add(2 * time.Minute)
		_, ok := b.JoinRequestedAt(DeleteKey("u1"), asked, 30*time.Second)
		assert.False(t, ok, "alice's record was made a minute before the delete was asked for")
		assert.Equal(t, 0, b.Len())

		b.Record(DeleteKey("u2"), Author{Username: "carol"})
		asked = now.Add(time.Second) // the API server's clock, a second ahead
		now = now.Add(3 * time.Minute)
		got, ok := b.JoinRequestedAt(DeleteKey("u2"), asked, 30*time.Second)
		assert.True(t, ok, "her delete, finished three minutes later")
		assert.Equal(t, "carol", got.Username)

		asked = now
		b.Record(DeleteKey("u3"), Author{Username: "dave"})
		now = now.Add(40 * time.Second)
		b.Record(DeleteKey("u3"), Author{Username: "dave"}) // kubectl stuck on the finalizer: Ctrl-C, and again
		now = now.Add(2 * time.Minute)
		got, ok = b.JoinRequestedAt(DeleteKey("u3"), asked, 30*time.Second)
		assert.True(t, ok, "the delete asked for again is still his")
		assert.Equal(t, "dave", got.Username)
	})
	t.Run("does not give a removal to whoever repeated its delete after the record of the one asked for expired", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := NewBook(0, 0)
		b.now = func() time.Time { return now }
		asked := now
		b.Record(DeleteKey("u1"), Author{Username: "alice"}) // a PVC held by its protection finalizer
		now = now.Add(DefaultDeleteTTL + 10*time.Minute)     // her record expired
		b.Record(DeleteKey("u1"), Author{Username: "bob"})   // kubectl delete again: the object is already being deleted
		now = now.Add(time.Minute)
		_, ok := b.JoinRequestedAt(DeleteKey("u1"), asked, 30*time.Second)
		assert.False(t, ok, "within the hour his repeat would have made it ambiguous; after it, it is the committer's")
	})
	t.Run("drops the oldest record beyond the limit", func(t *testing.T) {
		b := NewBook(0, 2)
		b.Record(CreateKey("u1"), Author{Username: "a"})
		b.Record(CreateKey("u2"), Author{Username: "b"})
		b.Record(CreateKey("u3"), Author{Username: "c"})
		assert.Equal(t, 2, b.Len())
		_, ok := b.Join(CreateKey("u1"))
		assert.False(t, ok)
		got, ok := b.Join(CreateKey("u3"))
		assert.True(t, ok)
		assert.Equal(t, "c", got.Username)
	})
	t.Run("keeps a delete's record for an hour, for a delete that waits for its finalizers", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := NewBook(0, 0)
		b.now = func() time.Time { return now }
		asked := now
		b.Record(DeleteKey("u1"), Author{Username: "alice"}) // a namespace, emptied for 20 minutes
		b.Record(CreateKey("u2"), Author{Username: "bob"})
		now = now.Add(20 * time.Minute)
		assert.Equal(t, 1, b.Len(), "the create's record expired at the Book's TTL")
		got, ok := b.JoinRequestedAt(DeleteKey("u1"), asked, 30*time.Second)
		assert.True(t, ok)
		assert.Equal(t, "alice", got.Username)
		b.Record(DeleteKey("u3"), Author{Username: "carol"})
		now = now.Add(DefaultDeleteTTL)
		assert.Equal(t, 0, b.Len(), "and gone after the hour")
	})
	t.Run("drops the oldest record beyond the limit, a delete's too", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := NewBook(0, 2)
		b.now = func() time.Time { return now }
		b.Record(DeleteKey("u1"), Author{Username: "a"})
		now = now.Add(time.Second)
		b.Record(CreateKey("u2"), Author{Username: "b"})
		now = now.Add(time.Second)
		b.Record(CreateKey("u3"), Author{Username: "c"})
		assert.Equal(t, 2, b.Len())
		_, ok := b.Join(DeleteKey("u1"))
		assert.False(t, ok)
		_, ok = b.Join(CreateKey("u2"))
		assert.True(t, ok)
	})
	t.Run("a delete of an object not being deleted replaces the record of one that never took effect", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := NewBook(0, 0)
		b.now = func() time.Time { return now }
		first := func(uid types.UID) Key {
			k := DeleteKey(uid)
			k.First = true
			return k
		}
		b.Record(first("u1"), Author{Username: "alice"}) // admitted here, refused by another admission step
		now = now.Add(time.Minute)
		b.Record(first("u1"), Author{Username: "bob"})
		got, ok := b.JoinWithin(DeleteKey("u1"), 0)
		assert.True(t, ok)
		assert.Equal(t, "bob", got.Username)

		b.Record(first("u2"), Author{Username: "alice"}) // two deletes at once: either may be the one stored
		now = now.Add(time.Second)
		b.Record(first("u2"), Author{Username: "mallory"})
		_, ok = b.JoinWithin(DeleteKey("u2"), 0)
		assert.False(t, ok, "ambiguous, as before")
	})
	t.Run("two users recorded for one change leave it unattributed, never given to either", func(t *testing.T) {
		b := NewBook(0, 0)
		b.Record(DeleteKey("u1"), Author{Username: "alice"})
		b.Record(DeleteKey("u1"), Author{Username: "mallory"})
		_, ok := b.Join(DeleteKey("u1"))
		assert.False(t, ok)
	})
	t.Run("the same user recorded twice (a retried request) still joins", func(t *testing.T) {
		b := NewBook(0, 0)
		b.Record(DeleteKey("u1"), Author{Username: "alice"})
		b.Record(DeleteKey("u1"), Author{Username: "alice"})
		got, ok := b.Join(DeleteKey("u1"))
		assert.True(t, ok)
		assert.Equal(t, "alice", got.Username)
	})
	t.Run("does not record an empty or oversized username", func(t *testing.T) {
		b := NewBook(0, 0)
		b.Record(CreateKey("u1"), Author{})
		b.Record(CreateKey("u2"), Author{Username: strings.Repeat("x", MaxUsernameBytes+1)})
		assert.Equal(t, 0, b.Len())
	})
}

func TestSameContent(t *testing.T) {
	old := cm("u1", "5", "a")
	statusOnly := cm("u1", "6", "a")
	statusOnly.Object["status"] = map[string]any{"phase": "Ready"}
	k, ok := KeyForEvent(old, statusOnly)
	require.True(t, ok)
	assert.True(t, SameContent(k, old), "a status-only write changes nothing in Git")
	k, _ = KeyForEvent(old, cm("u1", "6", "b"))
	assert.False(t, SameContent(k, old), "a data change does")
	assert.False(t, SameContent(CreateKey("u1"), nil), "a create is never the same content")
}

func TestJoinCreated(t *testing.T) {
	alice, bob := Author{Username: "alice"}, Author{Username: "bob"}
	record := func(b *Book, op Op, obj, old *unstructured.Unstructured, a Author) {
		k, ok := KeyForRequest(op, obj, old)
		require.True(t, ok)
		b.Record(k, a)
	}
	tests := []struct {
		name   string
		record func(*Book)
		seen   *unstructured.Unstructured // the object as the watch first shows it
		want   *Author
	}{
		{"joins the create of an object seen as it was created",
			func(b *Book) { record(b, Create, cm("u1", "", "a"), nil, alice) }, cm("u1", "5", "a"), &alice},
		{"joins the update that left the object as seen, after a re-list whose gap hid the create and that update",
			func(b *Book) {
				record(b, Create, cm("u1", "", "a"), nil, alice)
				record(b, Update, cm("u1", "5", "b"), cm("u1", "5", "a"), bob)
			}, cm("u1", "6", "b"), &bob},
		{"leaves unattributed an object no recorded write left as seen (an update nobody recorded)",
			func(b *Book) {
				record(b, Create, cm("u1", "", "a"), nil, alice)
				record(b, Update, cm("u1", "5", "b"), cm("u1", "5", "a"), bob)
			}, cm("u1", "7", "c"), nil},
		{"joins the update that made the content seen, not a later one that changed only what Git does not hold (a controller's status write)",
			func(b *Book) {
				record(b, Create, cm("u1", "", "a"), nil, alice)
				record(b, Update, cm("u1", "5", "b"), cm("u1", "5", "a"), bob)
				withStatus := cm("u1", "6", "b")
				withStatus.Object["status"] = map[string]any{"observedGeneration": int64(2)}
				record(b, Update, withStatus, cm("u1", "6", "b"), Author{Username: "system:serviceaccount:kube-system:deployment-controller"})
			}, cm("u1", "7", "b"), &bob},
		{"keeps the create's author when an update after it left the same content",
			func(b *Book) {
				record(b, Create, cm("u1", "", "a"), nil, alice)
				record(b, Update, cm("u1", "5", "a"), cm("u1", "5", "a"), bob)
			}, cm("u1", "5", "a"), &alice},
		{"joins by UID alone a create requested in another API version than the watch's",
			func(b *Book) {
				requested := cm("u1", "", "a")
				requested.SetAPIVersion("v1beta1")
				record(b, Create, requested, nil, alice)
			}, cm("u1", "5", "a"), &alice},
		{"does not join by UID alone a create in another API version once someone changed the object in that version",
			func(b *Book) {
				requested := cm("u1", "", "a")
				requested.SetAPIVersion("v1beta1")
				record(b, Create, requested, nil, alice)
				updated, before := cm("u1", "5", "b"), cm("u1", "5", "a")
				updated.SetAPIVersion("v1beta1")
				before.SetAPIVersion("v1beta1")
				record(b, Update, updated, before, bob) // its digest, in v1beta1, matches nothing the watch shows
			}, cm("u1", "6", "b"), nil},
		{"still joins by UID alone a create in another API version after an update that changed nothing Git holds",
			func(b *Book) {
				requested := cm("u1", "", "a")
				requested.SetAPIVersion("v1beta1")
				record(b, Create, requested, nil, alice)
				withStatus := cm("u1", "5", "a")
				withStatus.Object["status"] = map[string]any{"ready": true}
				record(b, Update, withStatus, cm("u1", "5", "a"), bob)
			}, cm("u1", "6", "a"), &alice},
		{"joins a create recorded without a digest, as a replica of an earlier release forwards it",
			func(b *Book) { b.Record(CreateKey("u1"), alice) }, cm("u1", "5", "b"), &alice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBook(0, 0)
			tt.record(b)
			seen, ok := KeyForEvent(nil, tt.seen)
			require.True(t, ok)
			got, joined := b.JoinCreated(seen, tt.seen.GetResourceVersion())
			if tt.want == nil {
				assert.False(t, joined)
			} else {
				assert.True(t, joined)
				assert.Equal(t, *tt.want, who(got))
			}
			_, again := b.Join(CreateKey("u1"))
			assert.False(t, again, "the create's record is used up")
		})
	}
}

func TestCreatedBy(t *testing.T) {
	alice := Author{Username: "alice"}
	b := NewBook(0, 0)
	k, ok := KeyForRequest(Create, cm("u1", "", "a"), nil)
	require.True(t, ok)
	b.Record(k, alice)
	live, staging := types.NamespacedName{Namespace: "ops", Name: "live"}, types.NamespacedName{Namespace: "ops", Name: "staging"}
	listedFor := func(target types.NamespacedName, obj *unstructured.Unstructured) (Author, bool) {
		return b.CreatedBy(obj.GetUID(), target, func() (Key, bool) { return KeyForEvent(nil, obj) })
	}
	listed := func(obj *unstructured.Unstructured) (Author, bool) { return listedFor(live, obj) }

	_, ok = listed(cm("u1", "6", "b"))
	assert.False(t, ok, "changed since: a list cannot tell by whom")
	_, ok = listed(cm("u2", "5", "a"))
	assert.False(t, ok, "another object")
	got, ok := listed(cm("u1", "5", "a"))
	assert.True(t, ok, "a list shows the object as its create left it")
	assert.Equal(t, alice, got)
	_, ok = listed(cm("u1", "5", "a"))
	assert.False(t, ok, "only the first list: a later one (a rule edited, a re-list) is no one's change")
	got, ok = listedFor(staging, cm("u1", "5", "a"))
	assert.True(t, ok, "the first list of another target that selects it")
	assert.Equal(t, alice, got)
	seen, _ := KeyForEvent(nil, cm("u1", "5", "a"))
	got, ok = b.JoinCreated(seen, "5")
	assert.True(t, ok, "the record stays for the add event that may follow the list")
	assert.Equal(t, alice, who(got))

	b.Record(CreateKey("u3"), alice) // from a replica of an earlier release: no digest to compare
	_, ok = b.CreatedBy("u3", live, func() (Key, bool) { return KeyForEvent(nil, cm("u3", "5", "a")) })
	assert.False(t, ok)
}

// who is a joined Author without the time of its record, to compare with the one recorded.
func who(a Author) Author {
	a.RecordedAt = time.Time{}
	return a
}

func TestTheWatchLagIsTimedForCreatesAndUpdatesJoinedToTheirRecord(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, NewBook(0, 0))
	require.NoError(t, err)
	now := time.Now()
	m.Lagged(Update, Author{Username: "alice", RecordedAt: now.Add(-2 * time.Second)}, now)
	m.Lagged(Create, Author{Username: "alice", RecordedAt: now.Add(time.Second)}, now) // a clock step back: no lag
	m.Lagged(Delete, Author{Username: "alice", RecordedAt: now.Add(-time.Minute)}, now)
	m.Lagged(Update, Author{}, now)                                  // no record joined
	m.Lagged(Update, Author{RecordedAt: now.Add(-time.Minute)}, now) // an ambiguous record's: the second request's time
	var none *Metrics
	none.Lagged(Update, Author{Username: "alice", RecordedAt: now}, now)

	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "gitops_reverser_watch_lag_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			assert.Equal(t, uint64(2), h.GetSampleCount(), "only the update and the create are timed")
			assert.InDelta(t, 2.0, h.GetSampleSum(), 1e-9)
			return
		}
	}
	t.Fatal("no watch lag histogram registered")
}
