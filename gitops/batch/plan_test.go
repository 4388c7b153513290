package batch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

const pairFile = `# two ConfigMaps a human keeps in one file
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: app
data:
  k: a-old
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
  namespace: app
data:
  k: b-old
`

func TestLargeWindow(t *testing.T) {
	t.Run("commits a window of 102 changes in one commit, two objects of one human file included", func(t *testing.T) {
		s := newWriterScene(t, nil)
		// One window: with the scene's zero quiet the worker could commit the first changes
		// before the rest are submitted.
		s.spec.Window.Quiet = time.Second
		s.spec.Window.MaxChanges = 1000
		s.remote.PushFiles("main", map[string]string{"live/app/pair.yaml": pairFile}, "a human keeps two ConfigMaps in one file")
		s.ensure()
		keys := []batch.ObjectKey{
			s.cluster.put(cmGVR, "ConfigMap", "a", map[string]any{"k": "a-new"}),
			s.cluster.put(cmGVR, "ConfigMap", "b", map[string]any{"k": "b-new"}),
		}
		for i := range 100 {
			keys = append(keys, s.cluster.put(cmGVR, "ConfigMap", fmt.Sprintf("cm-%03d", i), map[string]any{"i": fmt.Sprint(i)}))
		}
		before := s.commits()
		st := s.submitAndSettle(keys...)
		require.Empty(t, st.Refused)
		require.Eventually(t, func() bool { return s.commits() == before+1 }, 10*time.Second, 50*time.Millisecond, "one commit")

		pair := s.remote.Show("main", "live/app/pair.yaml")
		assert.Contains(t, pair, "# two ConfigMaps a human keeps in one file")
		assert.Contains(t, pair, "k: a-new", "the first object's edit")
		assert.Contains(t, pair, "k: b-new", "the second object's edit, made on top of the first")
		assert.NotContains(t, pair, "-old")
		for i := range 100 {
			assert.Contains(t, s.remote.Show("main", fmt.Sprintf("live/app/configmaps/cm-%03d.yaml", i)), fmt.Sprintf("i: %q", fmt.Sprint(i)))
		}
		assert.Contains(t, s.remote.Log("main")[0], "102 changes")
		s.remote.Fsck()
	})
}

func TestARestartComparesEveryObjectWithGit(t *testing.T) {
	t.Run("leaves a document a person reformatted alone and writes back one whose value a person changed", func(t *testing.T) {
		s := newWriterScene(t, nil)
		a := s.cluster.put(cmGVR, "ConfigMap", "a", map[string]any{"k": "1"})
		b := s.cluster.put(cmGVR, "ConfigMap", "b", map[string]any{"k": "1"})
		s.submitAndSettle(a, b)
		reformatted := "# kept by hand\nkind: ConfigMap\napiVersion: v1\nmetadata: {namespace: app, name: a}\ndata:\n  k: '1'  # same value\n"
		s.remote.PushFiles("main", map[string]string{
			"live/app/configmaps/a.yaml": reformatted,
			"live/app/configmaps/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: app\ndata:\n  k: edited in Git\n",
		}, "a person reformats a and edits b")
		before := s.commits()

		s.restart()
		s.submitAndSettle(a, b) // the restart's snapshot

		require.Eventually(t, func() bool { return s.commits() == before+1 }, 10*time.Second, 50*time.Millisecond, "one commit, for b")
		assert.Equal(t, strings.TrimSpace(reformatted), s.remote.Show("main", "live/app/configmaps/a.yaml"), "as the person wrote it")
		assert.Contains(t, s.remote.Show("main", "live/app/configmaps/b.yaml"), `k: "1"`)
		assert.Contains(t, s.remote.Log("main")[0], "Update ConfigMap app/b")
	})
}

func TestAnUnwritableObjectHoldsBackNothingElse(t *testing.T) {
	t.Run("refuses an object whose file is a directory in Git and commits the other windows and targets of the branch", func(t *testing.T) {
		s := newWriterScene(t, nil)
		s.remote.PushFiles("main", map[string]string{
			"live/app/configmaps/bad.yaml/README.md": "a directory where bad's file belongs\n",
			"zz/README.md":                           "another target's folder\n",
		}, "a person makes a directory named like a file")
		s.ensure()
		other := s.spec
		other.Key = types.NamespacedName{Namespace: "ops", Name: "zz"}
		other.Folder = "zz"
		_, err := s.writer.EnsureTarget(context.Background(), other)
		require.NoError(t, err)

		bad := s.cluster.put(cmGVR, "ConfigMap", "bad", map[string]any{"k": "v"})
		good := s.cluster.put(cmGVR, "ConfigMap", "good", map[string]any{"k": "v"})
		s.writer.Submit(batch.Change{Target: targetKey, Key: bad, Author: "alice"})
		s.writer.Submit(batch.Change{Target: targetKey, Key: good, Author: "bob"})
		s.writer.Submit(batch.Change{Target: other.Key, Key: good, Author: "carol"})

		require.Eventually(t, func() bool {
			tree := s.remote.LsTree("main")
			return strings.Contains(tree, "live/app/configmaps/good.yaml") && strings.Contains(tree, "zz/app/configmaps/good.yaml")
		}, 10*time.Second, 50*time.Millisecond, "bob's window and the other target commit")
		st, _ := s.writer.Status(targetKey)
		assert.Empty(t, st.LastError, "nothing failed: one object was refused")
		require.Len(t, st.Refused, 1)
		problem := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "bad").Problem
		assert.Contains(t, problem, "live/app/configmaps/bad.yaml is a directory in Git")
		assert.Equal(t, "ConfigMap app/bad: not written: "+problem, st.Refused[0], "admission denies it with the same reason")
		assert.Contains(t, s.remote.Show("main", "live/app/configmaps/bad.yaml/README.md"), "a directory", "the person's file is kept")
	})
	t.Run("refuses an object whose document is in a file named with a backslash, with the reason admission gives", func(t *testing.T) {
		s := personsFilesScene(t, false, map[string]string{
			`live/app/we\ird.yaml`: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: app\ndata:\n  k: old\n",
		}, "a person names a file with a backslash, which Git allows on Linux")
		at := s.writer.Locate(targetKey, cmGVR, "ConfigMap", "app", "x")
		assert.Equal(t, `live/app/we\ird.yaml`, at.Path)
		assert.Contains(t, at.Problem, "rename the file in Git")
		before := s.commits()
		st := s.submitAndSettle(
			s.cluster.put(cmGVR, "ConfigMap", "x", map[string]any{"k": "v"}),
			s.cluster.put(cmGVR, "ConfigMap", "other", map[string]any{"k": "v"}))
		require.Len(t, st.Refused, 1)
		assert.Equal(t, "ConfigMap app/x: not written: "+at.Problem, st.Refused[0])
		assert.Empty(t, st.LastError)
		assert.Equal(t, before+1, s.commits(), "the other ConfigMap is written")
		assert.Contains(t, s.remote.Show("main", `live/app/we\ird.yaml`), "k: old", "the person's file is kept")
	})
	t.Run("refuses a Secret whose encrypted file's path is a directory in Git, with the reason admission gives", func(t *testing.T) {
		ids, recipients := identity(t)
		s := newWriterScene(t, &batch.Encryption{Recipients: recipients, Identities: ids})
		s.remote.PushFiles("main", map[string]string{"live/app/secrets/db.sops.yaml/README.md": "a directory where db's file belongs\n"}, "a person makes a directory named like a file")
		s.restart()
		at := s.writer.Locate(targetKey, secretsGVR, "Secret", "app", "db")
		assert.Contains(t, at.Problem, "live/app/secrets/db.sops.yaml is a directory in Git")
		st := s.submitAndSettle(s.cluster.put(secretsGVR, "Secret", "db", map[string]any{"password": "bmV3"}))
		require.Len(t, st.Refused, 1)
		assert.Equal(t, "Secret app/db: not written: "+at.Problem, st.Refused[0])
	})
}
