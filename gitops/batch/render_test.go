package batch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// A window of hundreds of new objects is rendered on every core before it is planned
// (renderNew); a window of fewer is rendered one object at a time. Both must write the
// same files, including the object whose file a person wrote before.
func TestAWindowOfManyNewObjectsIsWrittenAsSmallerWindowsWouldWriteIt(t *testing.T) {
	const objects = 300 // renderAhead is 256
	seed := map[string]string{"live/README.md": "objects\n",
		"live/app/configmaps/cm-0003.yaml": "# a person's note\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-0003\n  namespace: app\ndata:\n  k: old\n"}
	write := func(t *testing.T, perWindow int) *repotest.Remote {
		t.Helper()
		remote := repotest.NewFileRemote(t)
		remote.Seed("main", seed, "seed")
		writer, c := startWriter(t)
		spec := targetSpec(t, "live", remote.URL, nil)
		spec.Window = batch.WindowConfig{Quiet: 10 * time.Millisecond, MaxDelay: time.Hour}
		_, err := writer.EnsureTarget(context.Background(), spec)
		require.NoError(t, err)
		for first := 0; first < objects; first += perWindow {
			var changes []batch.Change
			for i := first; i < min(first+perWindow, objects); i++ {
				key := c.put(cmGVR, "ConfigMap", fmt.Sprintf("cm-%04d", i), map[string]any{"k": fmt.Sprint(i)})
				changes = append(changes, batch.Change{Target: targetKey, Key: key, Author: "alice"})
			}
			commits := len(remote.Log("main"))
			writer.Submit(changes...) // under one lock: one window
			require.Eventually(t, func() bool { return len(remote.Log("main")) > commits }, 20*time.Second, 20*time.Millisecond)
		}
		return remote
	}

	many, few := write(t, objects), write(t, 100)

	require.Len(t, many.Log("main"), 2, "the seed and one window's commit")
	require.Len(t, few.Log("main"), 4, "the seed and three windows' commits")
	assert.Equal(t, few.LsTree("main"), many.LsTree("main"), "the same files, to the byte")
	assert.Equal(t, objects, strings.Count(many.LsTree("main"), "live/app/configmaps/cm-"))
	assert.Contains(t, many.Show("main", "live/app/configmaps/cm-0003.yaml"), "# a person's note")
}
