package batch_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/encrypt"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

var (
	targetKey  = types.NamespacedName{Namespace: "ops", Name: "live"}
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	cmGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// cluster is the objects the writer reads at commit time, as the watcher's caches would
// hold them.
type cluster struct {
	mu   sync.Mutex
	objs map[batch.ObjectKey]*unstructured.Unstructured
	// unsynced are the objects whose cache is not complete: Current answers ErrNotSynced.
	unsynced map[batch.ObjectKey]bool
	// unwatched are the objects no registered rule routes to the target: Current answers
	// ErrNotWatched.
	unwatched map[batch.ObjectKey]bool
}

func (c *cluster) Current(_ types.NamespacedName, k batch.ObjectKey) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsynced[k] {
		return nil, batch.ErrNotSynced
	}
	if c.unwatched[k] {
		return nil, batch.ErrNotWatched
	}
	if o := c.objs[k]; o != nil {
		return o.DeepCopy(), nil
	}
	return nil, nil
}

// setSynced says whether the cache of k is complete.
func (c *cluster) setSynced(k batch.ObjectKey, synced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsynced == nil {
		c.unsynced = map[batch.ObjectKey]bool{}
	}
	c.unsynced[k] = !synced
}

// setWatched says whether a registered rule routes k to the target.
func (c *cluster) setWatched(k batch.ObjectKey, watched bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unwatched == nil {
		c.unwatched = map[batch.ObjectKey]bool{}
	}
	c.unwatched[k] = !watched
}

// put stores an object and returns its key.
func (c *cluster) put(gvr schema.GroupVersionResource, kind, name string, data map[string]any) batch.ObjectKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "app"}, "data": data}}
	k := batch.ObjectKey{GVR: gvr, Kind: kind, Namespace: "app", Name: name}
	c.objs[k] = o
	return k
}

// writerScene is a running writer on a real bare remote.
type writerScene struct {
	t       *testing.T
	remote  *repotest.Remote
	cluster *cluster
	writer  *batch.Manager
	spec    batch.TargetSpec
	stop    func()
}

func newWriterScene(t *testing.T, enc *batch.Encryption) *writerScene {
	t.Helper()
	return newWriterSceneWith(t, enc, batch.Options{WorkDir: t.TempDir()})
}

// newWriterSceneWith is newWriterScene with the writer's options (the scene sets Resolver and
// Log).
func newWriterSceneWith(t *testing.T, enc *batch.Encryption, opts batch.Options) *writerScene {
	t.Helper()
	return newWriterSceneOn(t, repotest.NewFileRemote(t), enc, opts)
}

// newWriterSceneOn is newWriterSceneWith on an empty remote of the test's.
func newWriterSceneOn(t *testing.T, remote *repotest.Remote, enc *batch.Encryption, opts batch.Options) *writerScene {
	t.Helper()
	remote.Seed("main", map[string]string{"live/README.md": "objects\n"}, "seed")
	msgs, err := batch.ParseMessages("", "")
	require.NoError(t, err)
	s := &writerScene{t: t, remote: remote, cluster: &cluster{objs: map[batch.ObjectKey]*unstructured.Unstructured{}},
		spec: batch.TargetSpec{
			Key: targetKey, URL: remote.URL, Branch: "main", Folder: "live", Messages: msgs,
			Window:    batch.WindowConfig{MaxDelay: time.Second, MaxChanges: 100},
			Committer: batch.Identity{Name: "Writer", Email: "w@example.com"}, Encryption: enc,
		}}
	s.start(opts)
	return s
}

// start runs a writer with opts (the scene sets Resolver and Log) and registers the target.
func (s *writerScene) start(opts batch.Options) {
	s.t.Helper()
	opts.Resolver, opts.Log = s.cluster, logr.Discard()
	s.writer = batch.NewManager(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.writer.Start(ctx); close(done) }()
	s.stop = func() { cancel(); <-done }
	s.t.Cleanup(s.stop)
	s.ensure()
}

// restart stops the writer and starts a new one on a fresh work dir, as a new pod would.
func (s *writerScene) restart() {
	s.t.Helper()
	s.stop()
	s.start(batch.Options{WorkDir: s.t.TempDir()})
}

// ensure registers the target (as its controller does) with the scene's spec.
func (s *writerScene) ensure() batch.TargetStatus {
	s.t.Helper()
	st, err := s.writer.EnsureTarget(context.Background(), s.spec)
	require.NoError(s.t, err)
	return st
}

// submitAndSettle marks keys dirty and waits until the writer has nothing pending or being
// committed, and no error: what it was given has landed.
func (s *writerScene) submitAndSettle(keys ...batch.ObjectKey) batch.TargetStatus {
	s.t.Helper()
	return s.settleChanges(false, keys...)
}

// deleteAndSettle is submitAndSettle for the delete events of keys.
func (s *writerScene) deleteAndSettle(keys ...batch.ObjectKey) batch.TargetStatus {
	s.t.Helper()
	return s.settleChanges(true, keys...)
}

func (s *writerScene) settleChanges(deleted bool, keys ...batch.ObjectKey) batch.TargetStatus {
	s.t.Helper()
	for _, k := range keys {
		s.writer.Submit(batch.Change{Target: targetKey, Key: k, Deleted: deleted})
	}
	time.Sleep(300 * time.Millisecond) // a zero quiet window commits at once
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if st, ok := s.writer.Status(targetKey); ok && st.LastError == "" && s.writer.Settled(targetKey) {
			return st
		}
	}
	st, _ := s.writer.Status(targetKey)
	s.t.Fatalf("writer did not settle: %+v", st)
	return st
}

func (s *writerScene) commits() int { return len(s.remote.Log("main")) }

// identity makes an age identity and the keys of a target holding it.
func identity(t *testing.T) (encrypt.Identities, encrypt.Recipients) {
	t.Helper()
	private, _, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	ids, err := encrypt.ParseIdentities(map[string][]byte{"k.agekey": []byte(private)})
	require.NoError(t, err)
	return ids, ids.Recipients()
}

// decrypted opens a committed file and returns its data map.
func decrypted(t *testing.T, content string, ids encrypt.Identities) map[string]any {
	t.Helper()
	plain, err := encrypt.Decrypt([]byte(content), ids)
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, sigsyaml.Unmarshal(plain, &obj))
	return obj["data"].(map[string]any)
}

func TestReadableFields(t *testing.T) {
	cases := []struct {
		name string
		obj  map[string]any
		want []string
	}{
		{"accepts a Secret whose values are all under data and stringData",
			map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{}, "type": "Opaque", "immutable": true,
				"data": map[string]any{}, "stringData": map[string]any{}}, nil},
		{"ignores status, which is never written",
			map[string]any{"apiVersion": "v1", "kind": "Secret", "status": map[string]any{}}, nil},
		{"names fields sops would leave readable, sorted",
			map[string]any{"apiVersion": "bitnami.com/v1alpha1", "kind": "SealedSecret", "spec": map[string]any{}, "extra": "x"}, []string{"extra", "spec"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, batch.ReadableFields(&unstructured.Unstructured{Object: tc.obj}))
		})
	}
}

func TestWriterEncryption(t *testing.T) {
	t.Run("refuses a Secret when the target has no encryption, and still writes the ConfigMap beside it", func(t *testing.T) {
		s := newWriterScene(t, nil)
		before := s.commits()
		st := s.submitAndSettle(
			s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}),
			s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}))
		require.Len(t, st.Refused, 1)
		assert.Contains(t, st.Refused[0], "Secret app/db")
		assert.Contains(t, st.Refused[0], "spec.encryption.age")
		assert.Equal(t, before+1, s.commits())
		assert.NotContains(t, s.remote.LsTree("main"), "secrets")
		assert.Contains(t, s.remote.Show("main", "live/app/configmaps/app.yaml"), "k: v")
	})
	t.Run("tells a CommitRequest whose commit lacks a refused Secret so, beside the commit", func(t *testing.T) {
		s := newWriterScene(t, nil)
		s.spec.Window = batch.WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}
		s.ensure()
		for _, k := range []batch.ObjectKey{
			s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}),
			s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}),
		} {
			s.writer.Submit(batch.Change{Target: targetKey, Key: k, Author: "alice"})
		}
		req := batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "release"}, Target: targetKey,
			Author: "alice", Message: "release the app", Deadline: time.Now().Add(time.Minute)}
		_, err := s.writer.Request(req)
		require.NoError(t, err)
		var out batch.RequestOutcome
		require.Eventually(t, func() bool { out, err = s.writer.Request(req); return err == nil && out.Done }, 10*time.Second, 50*time.Millisecond)
		assert.Equal(t, batch.ReasonCommitted, out.Reason)
		assert.Contains(t, s.remote.Log("main")[0], "release the app")
		assert.Contains(t, out.Message, "with the requested message; it lacks 1 of the changes, which the writer refused (Secret app/db")
		assert.NotContains(t, out.Message, "aHVudGVyMg==")
	})
	t.Run("keeps a refusal in status while other changes commit, until the object is planned again", func(t *testing.T) {
		s := newWriterScene(t, nil)
		secret := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		st := s.submitAndSettle(secret)
		require.Len(t, st.Refused, 1)
		before := s.commits()
		st = s.submitAndSettle(s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}))
		require.Equal(t, before+1, s.commits(), "the ConfigMap committed")
		require.Len(t, st.Refused, 1, "the Secret is still not in Git, and status still says so")
		assert.Contains(t, st.Refused[0], "Secret app/db")

		s.cluster.mu.Lock()
		delete(s.cluster.objs, secret)
		s.cluster.mu.Unlock()
		st = s.deleteAndSettle(secret)
		assert.Empty(t, st.Refused, "the Secret is gone: nothing is left to refuse")
	})
	t.Run("forgets a refusal when a complete list no longer has the object", func(t *testing.T) {
		s := newWriterScene(t, nil)
		require.Len(t, s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})).Refused, 1)
		s.writer.Snapshot(batch.Snapshot{Target: targetKey, GVR: secretsGVR, Kind: "Secret", InScope: func(string) bool { return true }})
		st, _ := s.writer.Status(targetKey)
		assert.Empty(t, st.Refused)
	})
	t.Run("writes a Secret encrypted to .sops.yaml beside a .sops.yaml config, and an unchanged Secret commits nothing", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		assert.Contains(t, s.remote.Show("main", "live/.sops.yaml"), recipients[0])
		assert.Contains(t, s.remote.Log("main")[0], "Create live/.sops.yaml for 1 age recipient(s)")
		k := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg==", "user": "YWRtaW4="})
		st := s.submitAndSettle(k)
		require.Empty(t, st.Refused)
		file := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		assert.NotContains(t, file, "aHVudGVyMg==")
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg==", "user": "YWRtaW4="}, decrypted(t, file, ids))

		before := s.commits()
		s.submitAndSettle(k)
		s.ensure()
		assert.Equal(t, before, s.commits(), "an unchanged Secret makes no commit")
	})
	t.Run("never leaves a value readable that a tool copied into a Secret's annotations", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		k := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		s.cluster.objs[k].SetAnnotations(map[string]string{"kapp.k14s.io/original": `{"data":{"password":"aHVudGVyMg=="}}`})
		require.Empty(t, s.submitAndSettle(k).Refused)
		file := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		assert.NotContains(t, file, "aHVudGVyMg==")
		assert.Contains(t, file, "kapp.k14s.io/original: ENC[", "the key stays readable, the value is ciphertext")
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg=="}, decrypted(t, file, ids))
	})
	t.Run("never writes an object encrypted in Git back in plaintext, once its resource is no longer sensitive", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		s.spec.Sensitive = []schema.GroupResource{cmGVR.GroupResource()} // spec.encryption.sensitiveResources
		s.ensure()
		k := s.cluster.put(cmGVR, "ConfigMap", "creds", map[string]any{"token": "T0KEN-1"})
		require.Empty(t, s.submitAndSettle(k).Refused)
		require.NotContains(t, s.remote.Show("main", "live/app/configmaps/creds.sops.yaml"), "T0KEN")

		s.spec.Sensitive, s.spec.Encryption = nil, nil // someone deletes the whole spec.encryption
		s.ensure()
		s.cluster.put(cmGVR, "ConfigMap", "creds", map[string]any{"token": "T0KEN-2"})
		st := s.submitAndSettle(k)
		require.Len(t, st.Refused, 1)
		assert.Contains(t, st.Refused[0], "never stored in plaintext")
		problem := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "creds").Problem
		assert.Equal(t, "ConfigMap app/creds: not written: "+problem, st.Refused[0], "admission denies it with the same reason")
		assert.NotContains(t, s.remote.LsTree("main"), "configmaps/creds.yaml")
		assert.NotContains(t, s.remote.Show("main", "live/app/configmaps/creds.sops.yaml"), "T0KEN")
	})
	t.Run("refuses, with admission's reason, an object encrypted in Git whose resource is no longer sensitive once a field sops leaves readable holds a value", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		s.spec.Sensitive = []schema.GroupResource{cmGVR.GroupResource()}
		s.ensure()
		k := s.cluster.put(cmGVR, "ConfigMap", "creds", map[string]any{"token": "T0KEN-1"})
		require.Empty(t, s.submitAndSettle(k).Refused)
		assert.True(t, s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "creds").Encrypted)

		s.spec.Sensitive = nil // no longer sensitive: its file stays encrypted
		s.ensure()
		s.cluster.put(cmGVR, "ConfigMap", "creds", map[string]any{"token": "T0KEN-2"})
		s.cluster.mu.Lock()
		s.cluster.objs[k].Object["binaryData"] = map[string]any{"blob": "QkxPQg=="} // sops would leave it readable
		s.cluster.mu.Unlock()
		before := s.commits()
		st := s.submitAndSettle(k)
		require.Len(t, st.Refused, 1)
		assert.Equal(t, "ConfigMap app/creds: not written: "+batch.ReadableProblem(cmGVR.GroupResource(), []string{"binaryData"}, "live/app/configmaps/creds.sops.yaml"),
			st.Refused[0], "admission gives the same reason, from Locate's Encrypted")
		assert.Contains(t, st.Refused[0], "decrypt that file in Git")
		assert.Equal(t, before, s.commits())
		assert.NotContains(t, s.remote.Show("main", "live/app/configmaps/creds.sops.yaml"), "QkxPQg")
		at := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "creds")
		assert.Equal(t, batch.Location{Path: "live/app/configmaps/creds.sops.yaml", Encrypted: true}, at)
	})
	t.Run("never writes key Secrets, not even encrypted: the target's own, labelled ones, and any holding an age private key", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids,
			KeySecrets: []types.NamespacedName{{Namespace: "app", Name: "age-keys"}}})
		labelled := s.cluster.put(secretsGVR, "Secret", "other-keys", map[string]any{"k.agekey": "eA=="})
		s.cluster.objs[labelled].SetLabels(map[string]string{batch.KeyMaterialLabel: "age-identity"})
		private, _, err := encrypt.GenerateIdentity()
		require.NoError(t, err)
		othersKey := s.cluster.put(secretsGVR, "Secret", "another-targets-keys", // unlabelled, named by no spec here
			map[string]any{"id.agekey": base64.StdEncoding.EncodeToString([]byte("# created: today\n" + private + "\n"))})
		fluxKey := s.cluster.put(secretsGVR, "Secret", "sops-age", map[string]any{"age.agekey": private}) // not base64: looked at as it is
		before := s.commits()
		st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "age-keys", map[string]any{"k.agekey": "eA=="}), labelled, othersKey, fluxKey)
		assert.Empty(t, st.Refused)
		assert.Equal(t, before, s.commits())
	})
	t.Run("never writes a GitProvider's credentials, not even encrypted, whichever provider names them", func(t *testing.T) {
		ids, recipients := identity(t)
		credentials := types.NamespacedName{Namespace: "app", Name: "git-auth"}
		s := newWriterSceneWith(t, &batch.Encryption{Recipients: recipients, Identities: ids},
			batch.Options{WorkDir: t.TempDir(), Credentials: func(n types.NamespacedName) (bool, error) { return n == credentials, nil }})
		st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "git-auth", map[string]any{"password": "VDBLRU4="}),
			s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}))
		assert.Empty(t, st.Refused)
		files := s.remote.LsTree("main")
		assert.Contains(t, files, "live/app/secrets/db.sops.yaml", "the other Secret of the window is written")
		assert.NotContains(t, files, "live/app/secrets/git-auth.sops.yaml")
	})
	t.Run("waits, with the reason in status, while it cannot tell whether a Secret is a GitProvider's credentials", func(t *testing.T) {
		ids, recipients := identity(t)
		var unanswered atomic.Bool
		unanswered.Store(true)
		s := newWriterSceneWith(t, &batch.Encryption{Recipients: recipients, Identities: ids},
			batch.Options{WorkDir: t.TempDir(), Credentials: func(types.NamespacedName) (bool, error) {
				if unanswered.Load() {
					return false, errors.New("cache not started")
				}
				return false, nil
			}})
		s.writer.Submit(batch.Change{Target: targetKey, Key: s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})})
		var st batch.TargetStatus
		require.Eventually(t, func() bool {
			st, _ = s.writer.Status(targetKey)
			return strings.Contains(st.LastError, "GitProvider's credentials")
		}, 10*time.Second, 50*time.Millisecond)
		assert.NotContains(t, s.remote.LsTree("main"), "live/app/secrets/db.sops.yaml", "nothing is written on a guess")

		unanswered.Store(false)
		s.submitAndSettle()
		assert.Contains(t, s.remote.LsTree("main"), "live/app/secrets/db.sops.yaml", "the Secret lands once the answer comes")
	})
	t.Run("changing one key changes only that key's ciphertext line and the sops metadata", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		k := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg==", "user": "YWRtaW4="})
		s.submitAndSettle(k)
		s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3", "user": "YWRtaW4="})
		s.submitAndSettle(k)
		diff := repotest.Git(t, s.remote.Dir, "diff", "--unified=0", "main~1", "main", "--", "live/app/secrets/db.sops.yaml")
		var changed []string
		for _, line := range strings.Split(diff, "\n") {
			if strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---") {
				if field := strings.Fields(strings.TrimPrefix(line, "-"))[0]; field != "lastmodified:" { // seconds: may not move
					changed = append(changed, field)
				}
			}
		}
		assert.ElementsMatch(t, []string{"password:", "mac:"}, changed, diff)
	})
	t.Run("recipients only: the digest keeps an unchanged Secret from committing", func(t *testing.T) {
		s, _ := recipientsOnlyScene(t)
		k := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		s.submitAndSettle(k)
		assert.True(t, strings.HasPrefix(s.remote.Show("main", "live/app/secrets/db.sops.yaml"), "# "+encrypt.DigestCommentKey))
		before := s.commits()
		s.submitAndSettle(k)
		assert.Equal(t, before, s.commits())
	})
	t.Run("refuses a Secret it cannot encrypt without dropping the other changes of the window", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		k := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		s.submitAndSettle(k)
		// The identity is gone and no digest key exists: the writer can tell neither whether
		// the Secret changed nor write it without churn, so it refuses it.
		s.spec.Encryption = &batch.Encryption{Recipients: recipients}
		s.ensure()
		before := s.commits()
		s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3"})
		st := s.submitAndSettle(k, s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}))
		require.Len(t, st.Refused, 1)
		assert.Contains(t, st.Refused[0], "Secret app/db: not written to live/app/secrets/db.sops.yaml: cannot be encrypted")
		assert.Contains(t, st.Refused[0], "or delete the file in Git so it is encrypted again from the cluster", "it says what to do")
		assert.NotContains(t, st.Refused[0], "bmV3")
		assert.Equal(t, before+1, s.commits())
		assert.Contains(t, s.remote.Show("main", "live/app/configmaps/app.yaml"), "k: v")
	})
	t.Run("a recipient change re-wraps existing files in one commit that says so, and the new identity decrypts", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		s.submitAndSettle(
			s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}),
			s.cluster.put(secretsGVR, "Secret", "api", map[string]any{"token": "dG9rZW4="}))
		before := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: append(append(encrypt.Recipients{}, recipients...), newRecipients...), Identities: ids}
		s.ensure()
		log := s.remote.Log("main")
		assert.Contains(t, log[0], "Re-wrap 2 encrypted file(s) in live")
		assert.Contains(t, s.remote.Show("main", "live/.sops.yaml"), newRecipients[0])
		after := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg=="}, decrypted(t, after, newIDs))
		assert.NotEqual(t, valueLine(before, "password:"), valueLine(after, "password:"),
			"a new data key: the added recipient never gets one proven for a set without it")
		s.ensure()
		assert.Len(t, s.remote.Log("main"), len(log), "re-wrapping is done once")
	})
	t.Run("refuses, naming its old file, a Secret holding key material that Git holds from before", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		k := s.cluster.put(secretsGVR, "Secret", "sops-age", map[string]any{"age.agekey": "b2xk"})
		require.Empty(t, s.submitAndSettle(k).Refused) // an earlier release wrote it: no key in it yet
		before := s.remote.Show("main", "live/app/secrets/sops-age.sops.yaml")
		require.NotEmpty(t, before)

		private, _, err := encrypt.GenerateIdentity()
		require.NoError(t, err)
		s.cluster.put(secretsGVR, "Secret", "sops-age", map[string]any{"age.agekey": base64.StdEncoding.EncodeToString([]byte(private))})
		st := s.submitAndSettle(k)
		require.Len(t, st.Refused, 1)
		assert.Contains(t, st.Refused[0], "holds key material")
		assert.Contains(t, st.Refused[0], "live/app/secrets/sops-age.sops.yaml was written before")
		assert.NotContains(t, st.Refused[0], private)
		assert.Equal(t, before, s.remote.Show("main", "live/app/secrets/sops-age.sops.yaml"), "left as it is")
	})
	t.Run("a recipient change never re-wraps for the new recipients a file of a Secret holding key material", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		before := keyMaterialWrittenBefore(t, s)
		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: append(append(encrypt.Recipients{}, recipients...), newRecipients...), Identities: ids}
		s.ensure()
		assertKeyMaterialLeft(t, s, before, newIDs)
	})
	t.Run("recipients only: a recipient change never re-encrypts a Secret holding key material from the cluster", func(t *testing.T) {
		s, key := recipientsOnlyScene(t)
		before := keyMaterialWrittenBefore(t, s)
		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: newRecipients, DigestKey: key}
		s.ensure()
		assertKeyMaterialLeft(t, s, before, newIDs)
	})
	t.Run("moves files written before annotation values were encrypted to the current rule, in the commit that updates .sops.yaml", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}))
		const rule, earlier = "encrypted_regex: ^(data|stringData|annotations)$", "encrypted_regex: ^(data|stringData)$"
		current := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		require.Contains(t, current, rule)
		// What an earlier release wrote: the same file under the earlier rule (no annotation
		// here, so its values and MAC are the same), and its .sops.yaml.
		cfg := s.remote.Show("main", "live/.sops.yaml")
		s.remote.PushFiles("main", map[string]string{
			"live/app/secrets/db.sops.yaml": strings.Replace(current, rule, earlier, 1),
			"live/.sops.yaml":               strings.Replace(cfg, "|annotations", "", 1),
		}, "as an earlier release left it")
		s.restart() // the upgrade: a new pod
		log := repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%B", "main")
		assert.Contains(t, log, "Encrypt the annotation values of 1 file(s) in live")
		assert.Contains(t, log, "1 file(s) written before annotation values were encrypted now encrypt them too")
		after := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		assert.Contains(t, after, rule)
		assert.Equal(t, valueLine(current, "password:"), valueLine(after, "password:"), "values keep their ciphertext")
		assert.Equal(t, cfg, s.remote.Show("main", "live/.sops.yaml"))
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg=="}, decrypted(t, after, ids))
	})
	t.Run("a recipient change re-wraps an encrypted file a person renamed, wherever it is", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}))
		c := s.remote.Clone("main")
		c.Git("mv", "live/app/secrets/db.sops.yaml", "live/app/secrets/db.yaml")
		c.CommitAndPush("main", "a person renames the file")
		s.restart()

		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: append(append(encrypt.Recipients{}, recipients...), newRecipients...), Identities: ids}
		s.ensure()
		assert.Contains(t, s.remote.Log("main")[0], "Re-wrap 1 encrypted file(s) in live")
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg=="}, decrypted(t, s.remote.Show("main", "live/app/secrets/db.yaml"), newIDs))
	})
	t.Run("recipients only: a recipient change re-encrypts Secrets from the cluster in one commit", func(t *testing.T) {
		s, key := recipientsOnlyScene(t)
		recipients := s.spec.Encryption.Recipients
		s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}))
		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: newRecipients, DigestKey: key}
		s.ensure()
		assert.Contains(t, s.remote.Log("main")[0], "Re-wrap 1 encrypted file(s) in live")
		after := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg=="}, decrypted(t, after, newIDs))
		assert.NotContains(t, after, recipients[0], "the removed recipient is gone from the file")
	})
	t.Run("recipients only: a recipient change keeps the rules of a file a person encrypted more of", func(t *testing.T) {
		s, key := recipientsOnlyScene(t)
		db := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		s.submitAndSettle(db)
		// What sops writes for this Secret, which has no labels, under a rule that encrypts
		// labels too: the same file but for the rule.
		const rule = "^(data|stringData|annotations|labels)$"
		written := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		require.Contains(t, written, "encrypted_regex: ^(data|stringData|annotations)$")
		theirs := strings.Replace(written, "encrypted_regex: ^(data|stringData|annotations)$", "encrypted_regex: "+rule, 1)
		s.remote.PushFiles("main", map[string]string{"live/app/secrets/db.sops.yaml": theirs}, "encrypt the labels too")
		s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3"})
		s.submitAndSettle(db) // the writer keeps the person's rule, and adds its digest
		require.Contains(t, s.remote.Show("main", "live/app/secrets/db.sops.yaml"), "encrypted_regex: "+rule)

		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: newRecipients, DigestKey: key}
		s.ensure()
		assert.Contains(t, s.remote.Log("main")[0], "Re-wrap 1 encrypted file(s) in live")
		after := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		assert.Contains(t, after, "encrypted_regex: "+rule, "the re-wrap keeps it too")
		assert.Equal(t, map[string]any{"password": "bmV3"}, decrypted(t, after, newIDs))
	})
	t.Run("recipients only: a Secret whose cache has not synced is left for a later listing, and the others are re-wrapped", func(t *testing.T) {
		s, key := recipientsOnlyScene(t)
		db := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		api := s.cluster.put(secretsGVR, "Secret", "api", map[string]any{"token": "dG9rZW4="})
		s.submitAndSettle(db, api)
		s.cluster.setSynced(api, false) // its Secret list keeps failing, say
		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: newRecipients, DigestKey: key}
		s.ensure() // no error: the target is not reported Unreachable for it
		msg := repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%B", "main")
		assert.Contains(t, msg, "Re-wrap 1 encrypted file(s) in live")
		assert.Contains(t, msg, "- live/app/secrets/api.sops.yaml")
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg=="}, decrypted(t, s.remote.Show("main", "live/app/secrets/db.sops.yaml"), newIDs))
		_, err := encrypt.Decrypt([]byte(s.remote.Show("main", "live/app/secrets/api.sops.yaml")), newIDs)
		assert.Error(t, err, "left as it was, for a later listing")
	})
	t.Run("recipients only: a recipient change leaves a Secret whose change has not reached a window to its author's commit", func(t *testing.T) {
		s, key := recipientsOnlyScene(t)
		db := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		s.submitAndSettle(db)
		written := s.remote.Show("main", "live/app/secrets/db.sops.yaml")
		// Her change is stored; its event is still on its way to the writer (or no rule of
		// the target writes updates): the digest shows Git does not hold it.
		s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3"})

		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: newRecipients, DigestKey: key}
		s.ensure()
		rekey := repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%B", "main")
		assert.Contains(t, rekey, "Not re-wrapped (no identity opens them, or what they hold cannot be read yet; renewed at their next change or listing):\n- live/app/secrets/db.sops.yaml")
		assert.Equal(t, written, s.remote.Show("main", "live/app/secrets/db.sops.yaml"), "her change is not in the committer's commit")

		s.writer.Submit(batch.Change{Target: targetKey, Key: db, Author: "alice"}) // her change arrives
		s.submitAndSettle()
		assert.Equal(t, "alice", repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%an", "main"))
		assert.Equal(t, map[string]any{"password": "bmV3"}, decrypted(t, s.remote.Show("main", "live/app/secrets/db.sops.yaml"), newIDs))
	})
	// pendingDuringRecipientChange writes Secret db (data.password hunter2), lets alice change
	// it to password (base64) in a window that stays open, and changes the recipients: the
	// re-wrap commit is the committer's. It returns the scene and the new identities.
	pendingDuringRecipientChange := func(t *testing.T, password string) (*writerScene, encrypt.Identities) {
		s, key := recipientsOnlyScene(t)
		db := s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="})
		s.submitAndSettle(db)
		s.spec.Window = batch.WindowConfig{Quiet: time.Hour, MaxDelay: time.Hour}
		s.ensure()
		s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": password})
		s.writer.Submit(batch.Change{Target: targetKey, Key: db, Author: "alice"}) // her window stays open

		newIDs, newRecipients := identity(t)
		s.spec.Encryption = &batch.Encryption{Recipients: newRecipients, DigestKey: key}
		s.ensure()
		rekey := repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%an%n%B", "main")
		assert.Contains(t, rekey, "Writer\n", "the recipient change is the committer's")
		assert.Contains(t, rekey, "Not re-wrapped (no identity opens them, or what they hold cannot be read yet; renewed at their next change or listing):\n- live/app/secrets/db.sops.yaml")
		_, err := encrypt.Decrypt([]byte(s.remote.Show("main", "live/app/secrets/db.sops.yaml")), newIDs)
		assert.Error(t, err, "her change is not in the committer's commit")

		_, err = s.writer.Request(batch.CommitRequest{Key: types.NamespacedName{Namespace: "ops", Name: "rotate"}, Target: targetKey,
			Author: "alice", Message: "rotate the database password", Deadline: time.Now().Add(time.Minute)})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return strings.Contains(s.remote.Log("main")[0], "rotate the database password") },
			10*time.Second, 50*time.Millisecond)
		assert.Equal(t, "alice", repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%an", "main"))
		return s, newIDs
	}
	t.Run("recipients only: a recipient change leaves a Secret whose change waits to its author's commit", func(t *testing.T) {
		s, newIDs := pendingDuringRecipientChange(t, "bmV3")
		assert.Equal(t, map[string]any{"password": "bmV3"}, decrypted(t, s.remote.Show("main", "live/app/secrets/db.sops.yaml"), newIDs),
			"her commit writes it for the new recipients")
	})
	t.Run("recipients only: a Secret left out of the re-wrap is wrapped for the new recipients by its window even when unchanged", func(t *testing.T) {
		s, newIDs := pendingDuringRecipientChange(t, "aHVudGVyMg==") // a list's change, or one that set the same value
		assert.Equal(t, map[string]any{"password": "aHVudGVyMg=="}, decrypted(t, s.remote.Show("main", "live/app/secrets/db.sops.yaml"), newIDs))
	})
}

// recipientsOnlyScene is a writer scene encrypting for a new age recipient without holding
// an identity (recipients-only mode: a digest key detects unchanged Secrets); it returns
// the digest key, which a later spec keeps.
func recipientsOnlyScene(t *testing.T) (*writerScene, encrypt.DigestKey) {
	t.Helper()
	_, recipients := identity(t)
	key, err := encrypt.GenerateDigestKey()
	require.NoError(t, err)
	return newWriterScene(t, &batch.Encryption{Recipients: recipients, DigestKey: key}), key
}

// valueLine returns the first line of content starting (after indentation) with prefix.
func valueLine(content, prefix string) string {
	for _, line := range strings.Split(content, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			return line
		}
	}
	return ""
}

// personsFileScene is a writer scene, started afresh, on a remote where a person committed
// content at path.
func personsFileScene(t *testing.T, path, content, message string) *writerScene {
	t.Helper()
	return personsFilesScene(t, false, map[string]string{path: content}, message)
}

// keyMaterialWrittenBefore has the writer write Secrets sops-age (no key in it yet, as an
// earlier release could) and db, then gives sops-age an age private key in the cluster. It
// returns sops-age's file as Git holds it.
func keyMaterialWrittenBefore(t *testing.T, s *writerScene) string {
	t.Helper()
	k := s.cluster.put(secretsGVR, "Secret", "sops-age", map[string]any{"age.agekey": "b2xk"})
	s.submitAndSettle(k, s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}))
	before := s.remote.Show("main", "live/app/secrets/sops-age.sops.yaml")
	private, _, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	s.cluster.put(secretsGVR, "Secret", "sops-age", map[string]any{"age.agekey": base64.StdEncoding.EncodeToString([]byte(private))})
	return before
}

// assertKeyMaterialLeft checks that the last commit re-wrapped db and left sops-age's file
// as it was (before), named in its message and unreadable to newIDs.
func assertKeyMaterialLeft(t *testing.T, s *writerScene, before string, newIDs encrypt.Identities) {
	t.Helper()
	msg := repotest.Git(t, s.remote.Dir, "log", "-1", "--format=%B", "main")
	assert.Contains(t, msg, "Re-wrap 1 encrypted file(s) in live")
	assert.Contains(t, msg, "they hold key material, which the operator never writes; remove them):\n- live/app/secrets/sops-age.sops.yaml")
	assert.Equal(t, before, s.remote.Show("main", "live/app/secrets/sops-age.sops.yaml"), "left as it is")
	_, err := encrypt.Decrypt([]byte(before), newIDs)
	assert.Error(t, err, "not wrapped for the new recipients")
}

// personsFilesScene is a writer scene, encrypting when asked (a new age identity), started
// afresh on a remote where a person committed files in one commit with message.
func personsFilesScene(t *testing.T, encrypting bool, files map[string]string, message string) *writerScene {
	t.Helper()
	var enc *batch.Encryption
	if encrypting {
		ids, recipients := identity(t)
		enc = &batch.Encryption{Recipients: recipients, Identities: ids}
	}
	s := newWriterScene(t, enc)
	co := s.remote.Clone("main")
	for path, content := range files {
		co.WriteFile(path, content)
	}
	co.CommitAndPush("main", message)
	s.restart()
	return s
}

func TestAnObjectIsNeverWrittenBesideADocumentOfItWithoutANamespace(t *testing.T) {
	s := personsFileScene(t, "live/app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: old\n",
		"a person writes the ConfigMap as for kubectl apply -n")
	before := s.commits()
	st := s.submitAndSettle(
		s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}),
		s.cluster.put(cmGVR, "ConfigMap", "other", map[string]any{"k": "v"}))
	require.Len(t, st.Refused, 1)
	assert.Contains(t, st.Refused[0], "live/app.yaml defines ConfigMap app without metadata.namespace")
	assert.Contains(t, st.Refused[0], "add namespace: app")
	assert.Equal(t, before+1, s.commits(), "the other ConfigMap is written")
	tree := s.remote.LsTree("main")
	assert.NotContains(t, tree, "live/app/configmaps/app.yaml", "never defined twice for whoever deploys the folder")
	assert.Contains(t, tree, "live/app/configmaps/other.yaml")

	at := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "app")
	assert.Equal(t, "live/app.yaml", at.Path)
	assert.Contains(t, at.Problem, "without metadata.namespace", "admission denies it with the same reason")
}

func TestAClusterScopedObjectIsNeverWrittenBesideADocumentOfItWithANamespace(t *testing.T) {
	s := personsFileScene(t, "live/chart-output.yaml",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n  namespace: team-a\nrules: []\n",
		"a chart's output sets a namespace on a ClusterRole, which the API server ignores")
	roles := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	key := batch.ObjectKey{GVR: roles, Kind: "ClusterRole", Name: "reader"}
	s.cluster.mu.Lock()
	s.cluster.objs[key] = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "reader"}, "rules": []any{}}}
	s.cluster.mu.Unlock()
	before := s.commits()
	st := s.submitAndSettle(key, s.cluster.put(cmGVR, "ConfigMap", "other", map[string]any{"k": "v"}))
	require.Len(t, st.Refused, 1)
	assert.Contains(t, st.Refused[0], "live/chart-output.yaml defines ClusterRole reader with metadata.namespace team-a")
	assert.Equal(t, before+1, s.commits(), "the other object is written")
	assert.NotContains(t, s.remote.LsTree("main"), "clusterroles/reader.yaml", "never defined twice for whoever deploys the folder")

	at := s.writer.Locate(targetKey, roles, "ClusterRole", "", "reader")
	assert.Equal(t, "live/chart-output.yaml", at.Path)
	assert.Equal(t, "rbac.authorization.k8s.io/ClusterRole reader: not written: "+at.Problem, st.Refused[0], "admission denies it with the same reason")
}

func TestAnObjectIsNeverWrittenIntoItsPathWhenAnotherObjectHoldsIt(t *testing.T) {
	s := personsFileScene(t, "live/app/configmaps/app.yaml",
		"# the team's settings\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata:\n  k: mine\n",
		"a person names a file after another object")
	before := s.commits()
	st := s.submitAndSettle(
		s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}),
		s.cluster.put(cmGVR, "ConfigMap", "other", map[string]any{"k": "v"}))
	require.Len(t, st.Refused, 1)
	assert.Contains(t, st.Refused[0], "ConfigMap app/app: not written: live/app/configmaps/app.yaml already holds ConfigMap app/settings")
	assert.Contains(t, st.Refused[0], "move or rename that document in Git")
	assert.Equal(t, before+1, s.commits(), "the other ConfigMap is written")
	assert.Equal(t, "# the team's settings\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata:\n  k: mine",
		s.remote.Show("main", "live/app/configmaps/app.yaml"), "the person's file is left as it was (Show trims the last line break)")

	problem := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "app").Problem
	assert.Equal(t, st.Refused[0], "ConfigMap app/app: not written: "+problem, "admission denies it with the same reason")
}

func TestAnObjectIsWrittenIntoItsPathWhenTheObjectHoldingItLeavesInTheSameWindow(t *testing.T) {
	s := personsFileScene(t, "live/app/configmaps/app.yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata:\n  k: mine\n",
		"a person names a file after another object")
	settings := batch.ObjectKey{GVR: cmGVR, Kind: "ConfigMap", Namespace: "app", Name: "settings"} // not in the cluster: deleted
	s.writer.Submit(batch.Change{Target: targetKey, Key: settings, Deleted: true})
	// ConfigMap app/app is planned before app/settings, whose removal empties the file.
	st := s.submitAndSettle(s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}))
	assert.Empty(t, st.Refused, "whichever of the two is planned first")
	doc := s.remote.Show("main", "live/app/configmaps/app.yaml")
	assert.Contains(t, doc, "name: app")
	assert.NotContains(t, doc, "settings")
}

func TestASecretIsRefusedAtApplyTimeWhenItsEncryptedPathHoldsAFileOfComments(t *testing.T) {
	s := personsFilesScene(t, true, map[string]string{
		"live/app/secrets/db.sops.yaml":     "# the database's password goes here once it is rotated\n",
		"live/app/configmaps/settings.yaml": "# the team's settings\n",
	}, "a person reserves the Secret's file with a comment")

	problem := s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "db").Problem
	require.NotEmpty(t, problem, "admission denies it: the writer could not write it")
	st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "aHVudGVyMg=="}))
	require.Len(t, st.Refused, 1)
	assert.Equal(t, "Secret app/db: not written: "+problem, st.Refused[0], "admission and the writer give the same reason")
	assert.Contains(t, problem, "live/app/secrets/db.sops.yaml already exists and is not this object's encrypted file")
	assert.Equal(t, "# the database's password goes here once it is rotated", s.remote.Show("main", "live/app/secrets/db.sops.yaml"),
		"the person's comment is kept")

	problem = s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "settings").Problem
	assert.Empty(t, problem, "a file of comments at a plaintext path takes the document after them")
}

func TestAnObjectWhoseNameGitRefusesInAPathIsRefusedAloneAndTheWindowCommits(t *testing.T) {
	s := newWriterScene(t, nil)
	before := s.commits()
	st := s.submitAndSettle(
		s.cluster.put(cmGVR, "ConfigMap", `CORP\admins`, map[string]any{"k": "v"}), // RBAC names may hold one; Git paths may not
		s.cluster.put(cmGVR, "ConfigMap", "kustomization", map[string]any{"k": "v"}),
		s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}))
	require.Len(t, st.Refused, 2)
	assert.Contains(t, strings.Join(st.Refused, "\n"), "contains a backslash")
	assert.Contains(t, strings.Join(st.Refused, "\n"), "would be named kustomization.yaml")
	assert.Empty(t, st.LastError, "refused, not a failure retried forever")
	assert.Equal(t, before+1, s.commits(), "the other ConfigMap is written")
	assert.NotContains(t, s.remote.LsTree("main"), "kustomization.yaml", "the folder stays one the writer owns")
	problem := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "kustomization").Problem
	assert.Contains(t, problem, "would be named kustomization.yaml", "admission denies it with the same reason")
}

func TestASecretsPlaintextDocumentIsJudgedWhereTheWriterMovesIt(t *testing.T) {
	const plaintext = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: app\ndata:\n  password: b2xk\n"
	scene := func(t *testing.T, files map[string]string) *writerScene {
		return personsFilesScene(t, true, files, "a person's files")
	}
	t.Run("denies it when its encrypted file's path holds a file of comments", func(t *testing.T) {
		s := scene(t, map[string]string{"live/app/db.yaml": plaintext, "live/app/secrets/db.sops.yaml": "# reserved\n"})
		at := s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "db")
		assert.Equal(t, "live/app/secrets/db.sops.yaml", at.Path, "where the writer would move it, not the plaintext file")
		require.NotEmpty(t, at.Problem)
		st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3"}))
		require.Len(t, st.Refused, 1)
		assert.Equal(t, "Secret app/db: not written: "+at.Problem, st.Refused[0], "admission and the writer give the same reason")
	})
	t.Run("denies it when the plaintext document is at its encrypted file's path, whatever the file's name says", func(t *testing.T) {
		s := scene(t, map[string]string{"live/app/secrets/db.sops.yaml": plaintext})
		at := s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "db")
		assert.Equal(t, "live/app/secrets/db.sops.yaml", at.Path)
		require.NotEmpty(t, at.Problem, "the writer would not write it over its own plaintext")
		st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3"}))
		require.Len(t, st.Refused, 1)
		assert.Equal(t, "Secret app/db: not written: "+at.Problem, st.Refused[0], "admission and the writer give the same reason")
	})
	t.Run("allows it, naming its encrypted file, when that path is free or an empty placeholder", func(t *testing.T) {
		s := scene(t, map[string]string{"live/app/db.yaml": plaintext, "live/app/secrets/db.sops.yaml": ""})
		at := s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "db")
		assert.Equal(t, "live/app/secrets/db.sops.yaml", at.Path)
		assert.Empty(t, at.Problem, "the writer writes over an empty file")
		st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3"}))
		assert.Empty(t, st.Refused)
		assert.Contains(t, s.remote.Show("main", "live/app/secrets/db.sops.yaml"), "ENC[")
		assert.NotContains(t, s.remote.LsTree("main"), "live/app/db.yaml", "the plaintext document is gone")
	})
}

func TestAKeySecretBesideADocumentOfItWithoutANamespaceIsSkippedNotRefused(t *testing.T) {
	s := personsFilesScene(t, true, map[string]string{"live/sops-age.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sops-age\n"},
		"a person's document of Flux's key Secret, without its namespace")
	private, _, err := encrypt.GenerateIdentity()
	require.NoError(t, err)
	st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "sops-age", map[string]any{"age.agekey": private}))
	assert.Empty(t, st.Refused, "admission lets key material through unjudged; the writer skips it, with nothing to fix")
	assert.NotContains(t, s.remote.LsTree("main"), "secrets/sops-age")
}

func TestAGitProviderWhoseURLCarriesATokenIsRefusedAndOneWithoutIsWritten(t *testing.T) {
	providers := batch.GitProviders.WithVersion("v1alpha1")
	s := newWriterScene(t, nil)
	provider := func(name, url string) batch.ObjectKey {
		k := batch.ObjectKey{GVR: providers, Kind: "GitProvider", Namespace: "app", Name: name}
		s.cluster.mu.Lock()
		defer s.cluster.mu.Unlock()
		s.cluster.objs[k] = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "reverser.gitops.dev/v1alpha1", "kind": "GitProvider",
			"metadata": map[string]any{"name": name, "namespace": "app"}, "spec": map[string]any{"url": url}}}
		return k
	}
	st := s.submitAndSettle(provider("token", "https://ghp_TOKEN@github.com/org/repo"), provider("clean", "ssh://git@github.com/org/repo"))
	require.Len(t, st.Refused, 1)
	assert.Contains(t, st.Refused[0], "GitProvider app/token: not written: its spec.url carries credentials")
	assert.NotContains(t, st.Refused[0], "ghp_TOKEN")
	tree := s.remote.LsTree("main")
	assert.Contains(t, tree, "live/app/reverser.gitops.dev/gitproviders/clean.yaml")
	assert.NotContains(t, tree, "token.yaml")
}

// A push the remote refuses is a write failure (WriteFailed), not an error: returned as one
// it read as an unreachable remote, and the controller retried it at once, pushing the
// re-wrap a dozen times in two minutes. It is tried again after a backoff of its own; a
// window that commits meanwhile does not end it, since the rotation has not landed.
func TestARewrapTheRemoteRefusesIsAWriteFailureTriedAfterABackoff(t *testing.T) {
	var refuse atomic.Bool
	var refused atomic.Int32
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if refuse.Load() && repotest.IsReceivePack(r) {
				refused.Add(1)
				http.Error(w, "protected branch", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	s := newWriterSceneOn(t, remote, nil, batch.Options{WorkDir: t.TempDir()})
	ctx, spec, writer := context.Background(), s.spec, s.writer

	ids, recipients := identity(t)
	spec.Encryption = &batch.Encryption{Recipients: recipients, Identities: ids} // .sops.yaml is to be written
	refuse.Store(true)
	first, err := writer.EnsureTarget(ctx, spec)
	require.NoError(t, err)
	assert.Contains(t, first.LastError, "pushing re-wrapped files")
	pushes := refused.Load()
	second, err := writer.EnsureTarget(ctx, spec) // the status write requeues the target at once
	require.NoError(t, err)
	assert.Equal(t, first.LastError, second.LastError, "the same message: no requeue loop")
	assert.Equal(t, pushes, refused.Load(), "not pushed again within its backoff")

	refuse.Store(false)
	writer.Submit(batch.Change{Target: targetKey, Key: s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"})})
	require.Eventually(t, func() bool { return strings.Contains(remote.LsTree("main"), "configmaps/app.yaml") },
		10*time.Second, 50*time.Millisecond)
	st, _ := writer.Status(targetKey)
	assert.Equal(t, first.LastError, st.LastError, "a window that commits does not end the re-wrap's failure")
	assert.NotContains(t, remote.LsTree("main"), "live/.sops.yaml")

	time.Sleep(time.Second) // the backoff
	third, err := writer.EnsureTarget(ctx, spec)
	require.NoError(t, err)
	assert.Empty(t, third.LastError, "the re-wrap landed")
	assert.Contains(t, remote.LsTree("main"), "live/.sops.yaml")
}

// A folder re-read after someone's commit reuses the index's parse of the files that did
// not change: it still knows them, and which of them are encrypted.
func TestAFolderReReadAfterSomeonesCommitStillKnowsTheFilesThatDidNotChange(t *testing.T) {
	ids, recipients := identity(t)
	s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
	s.spec.Sensitive = []schema.GroupResource{cmGVR.GroupResource()}
	s.ensure()
	creds := s.cluster.put(cmGVR, "ConfigMap", "creds", map[string]any{"token": "T0KEN-1"})
	require.Empty(t, s.submitAndSettle(creds).Refused)
	require.True(t, s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "creds").Encrypted)

	co := s.remote.Clone("main")
	co.WriteFile("live/README.md", "objects, and a person's note\n")
	co.CommitAndPush("main", "a person edits the README")
	s.spec.Sensitive = nil // what Locate says of creds now comes from the index alone
	s.ensure()             // within 5 s of the last fetch: no fetch
	// The push of app finds the remote moved: the folder is re-read, and app replayed.
	st := s.submitAndSettle(s.cluster.put(cmGVR, "ConfigMap", "app", map[string]any{"k": "v"}))

	require.Contains(t, s.remote.LsTree("main"), "live/app/configmaps/app.yaml")
	assert.Contains(t, s.remote.Show("main", "live/README.md"), "a person's note", "replayed on the person's commit")
	assert.Equal(t, 2, st.ObjectCount, "creds, whose parse was reused, is still indexed")
	assert.Equal(t, batch.Location{Path: "live/app/configmaps/creds.sops.yaml", Encrypted: true},
		s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "creds"), "and still known to be encrypted")
}
