package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// burst writes n ConfigMaps named prefix-0..n-1 holding value.
func burst(t *testing.T, ns, prefix string, n int, value string) {
	t.Helper()
	out, err := burstErr(ns, prefix, n, value)
	require.NoError(t, err, out)
}

// burstAsync runs burst in the background; wait on the channel for its outcome.
func burstAsync(ns, prefix string, n int, value string) <-chan error {
	done := make(chan error, 1)
	go func() {
		out, err := burstErr(ns, prefix, n, value)
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		done <- err
	}()
	return done
}

// burstErr writes the ConfigMaps with 8 concurrent clients (kubectl applies a List one
// object at a time, too slowly for a burst), creating or updating each.
func burstErr(ns, prefix string, n int, value string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", shared.kubeconfig)
	if err != nil {
		return "", err
	}
	cfg.QPS, cfg.Burst = 500, 500
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	names := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				if err := upsertConfigMap(cs, ns, fmt.Sprintf("%s-%d", prefix, i), value); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		names <- i
	}
	close(names)
	wg.Wait()
	close(errs)
	return "", <-errs
}

func upsertConfigMap(cs kubernetes.Interface, ns, name, value string) error {
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": value}}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cm.Data = map[string]string{"v": value}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// folderFiles lists the files under path on main.
func folderFiles(remote, path string) []string {
	out, err := gitErr(remote, "ls-tree", "-r", "--name-only", "main", path+"/")
	if err != nil || strings.TrimSpace(out) == "" {
		return nil
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

// waitObjects waits until every ConfigMap prefix-0..n-1 is on main holding value.
func waitObjects(t *testing.T, remote, folder, ns, prefix string, n int, value string, timeout time.Duration) {
	t.Helper()
	dir := fmt.Sprintf("%s/%s/configmaps", folder, ns)
	eventually(t, timeout, fmt.Sprintf("%d objects in %s", n, folder), func() (bool, string) {
		files := filesUnder(remote, dir)
		missing := 0
		var first string
		for i := 0; i < n; i++ {
			c, ok := files[fmt.Sprintf("%s/%s-%d.yaml", dir, prefix, i)]
			if !ok || !strings.Contains(c, fmt.Sprintf("v: %s", value)) {
				missing++
				if first == "" {
					first = fmt.Sprintf("%s-%d", prefix, i)
				}
			}
		}
		return missing == 0, fmt.Sprintf("%d missing, first %s", missing, first)
	})
}

// filesUnder reads every file under dir on main with two git processes (a poll of a
// thousand objects must not start a thousand), by path; none when the branch is missing.
func filesUnder(remote, dir string) map[string]string {
	out := map[string]string{}
	listing, err := gitErr(remote, "ls-tree", "-r", "main", dir+"/")
	if err != nil || strings.TrimSpace(listing) == "" {
		return out
	}
	var paths []string
	var ids strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		meta, path, _ := strings.Cut(line, "\t")
		if fields := strings.Fields(meta); len(fields) == 3 && fields[1] == "blob" {
			paths = append(paths, path)
			ids.WriteString(fields[2] + "\n")
		}
	}
	cmd := exec.Command("git", "--git-dir", remote, "cat-file", "--batch")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+shared.dir)
	cmd.Stdin = strings.NewReader(ids.String())
	batch, err := cmd.Output()
	if err != nil {
		return out
	}
	for _, path := range paths { // "<id> blob <size>\n<content>\n" each, in order
		header, rest, _ := bytes.Cut(batch, []byte("\n"))
		fields := strings.Fields(string(header))
		size, err := strconv.Atoi(fields[len(fields)-1])
		if err != nil || size > len(rest) {
			return out
		}
		out[path], batch = string(rest[:size]), rest[min(size+1, len(rest)):]
	}
	return out
}

func assertLinear(t *testing.T, remote string) {
	t.Helper()
	merges := strings.TrimSpace(git(t, remote, "rev-list", "--merges", "main"))
	assert.Empty(t, merges, "history must be linear")
}

// assertNoDuplicateDocuments checks every file of folder holds exactly one document.
func assertNoDuplicateDocuments(t *testing.T, remote, folder string) {
	t.Helper()
	for _, f := range folderFiles(remote, folder) {
		c, _ := fileAt(remote, f)
		assert.Equal(t, 1, strings.Count(c, "kind: ConfigMap"), "one document in %s", f)
	}
}

func TestBurstOfAThousandConfigMapsMakesAHandfulOfCommits(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "burst-a", remote, "live", "1s")
	watchConfigMaps(t, "burst-a", "")
	before := len(commits(t, remote))
	burst(t, "burst-a", "cm", 1000, "one")
	waitObjects(t, remote, "live", "burst-a", "cm", 1000, "one", 3*time.Minute)
	made := len(commits(t, remote)) - before
	t.Logf("1000 ConfigMaps became %d commits", made)
	assert.LessOrEqual(t, made, 10, "a burst is batched into a handful of commits")
	assertFolderEqualsCluster(t, remote, "live", "burst-a")
	fsck(t, remote)
}

func TestHumanCommitsDuringABurstAreKeptAndHistoryIsLinear(t *testing.T) {
	// Whether a person's push meets one of the operator's is left to chance by the burst; a
	// person's push just before the operator's first is not: the operator must replay.
	racer := t.TempDir()
	var raced atomic.Bool
	raceErr := make(chan error, 1)
	remote := newRemoteWith(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if repotest.IsReceivePack(r) && strings.HasPrefix(r.UserAgent(), "go-git") && raced.CompareAndSwap(false, true) {
				_, err := humanCommit(racer, 100)
				raceErr <- err
			}
			next.ServeHTTP(w, r)
		})
	})
	out, err := execGit(racer, "clone", "-q", remoteURL(t, remote), ".")
	require.NoError(t, err, out)
	op := startOperator(t, t.TempDir())
	setupTarget(t, "human-a", remote, "live", "1s")
	watchConfigMaps(t, "human-a", "")

	clone := t.TempDir()
	out, err = execGit(clone, "clone", remoteURL(t, remote), ".")
	require.NoError(t, err, out)
	done := make(chan error, 1)
	var pushed []string // each human commit as its push left it on main
	go func() {
		for i := 0; i < 20; i++ {
			sha, err := humanCommit(clone, i)
			if err != nil {
				done <- err
				return
			}
			pushed = append(pushed, sha)
		}
		done <- nil
	}()
	burst(t, "human-a", "cm", 200, "x")
	require.NoError(t, <-done)
	waitObjects(t, remote, "live", "human-a", "cm", 200, "x", 3*time.Minute)
	require.Len(t, pushed, 20)
	select { // by now the operator has pushed: the person's push came before its first
	case err := <-raceErr:
		require.NoError(t, err, "the person's push just before the operator's")
	case <-time.After(time.Minute):
		t.Fatal("the operator's first push never reached the remote, so no person's push raced it")
	}
	assert.Contains(t, op.logs.String(), "remote moved; replaying writes on the new tip")
	assert.Contains(t, git(t, remote, "log", "--format=%s", "main"), "human change 100")
	for i, sha := range pushed {
		_, err := gitErr(remote, "merge-base", "--is-ancestor", sha, "main")
		assert.NoError(t, err, "human change %d (%s) is on main as it was pushed, not rewritten", i, sha)
	}
	assertLinear(t, remote)
	assertNoDuplicateDocuments(t, remote, "live")
	fsck(t, remote)
}

// humanCommit commits a note outside the target folder, rebasing on the operator's pushes,
// and returns the commit as pushed.
func humanCommit(dir string, i int) (string, error) {
	if err := writeFile(filepath.Join(dir, "notes", fmt.Sprintf("%d.md", i)), "note\n"); err != nil {
		return "", err
	}
	steps := [][]string{{"add", "notes"}, {"-c", "user.name=Human", "-c", "user.email=h@example.com", "commit", "-q", "-m", fmt.Sprintf("human change %d", i)}}
	for _, s := range steps {
		if out, err := execGit(dir, s...); err != nil {
			return "", fmt.Errorf("%v: %s", err, out)
		}
	}
	for attempt := 0; attempt < 200; attempt++ {
		if _, err := execGit(dir, "push", "-q", "origin", "HEAD:main"); err == nil {
			sha, err := execGit(dir, "rev-parse", "HEAD")
			return strings.TrimSpace(sha), err
		}
		if out, err := execGit(dir, "-c", "user.name=Human", "-c", "user.email=h@example.com", "pull", "-q", "--rebase", "origin", "main"); err != nil {
			return "", fmt.Errorf("pull --rebase: %v: %s", err, out)
		}
	}
	return "", fmt.Errorf("human push %d never went through", i)
}

func TestKillNineDuringABurstConverges(t *testing.T) {
	remote := newRemote(t)
	work := t.TempDir()
	op := startOperator(t, work)
	// A quiet period of 1 s against kills 0.2 to 1.7 s after the round's writes: some kills
	// find its window open, others land while it is committed or pushed.
	setupTarget(t, "kill-a", remote, "live", "1s")
	watchConfigMaps(t, "kill-a", "")
	// One of these is deleted in each round, while the operator runs, shortly before the
	// kill: whether its deletion was pushed first is left to chance, and the folder must lose
	// its file either way, under the default prune mode (OnEvent), which keeps the documents
	// of objects deleted while the operator is down.
	burst(t, "kill-a", "gone", 5, "doomed")
	waitObjects(t, remote, "live", "kill-a", "gone", 5, "doomed", 2*time.Minute)
	seed := time.Now().UnixNano()
	t.Logf("kill moments from seed %d", seed) // a failing run's moments can be replayed with it
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 5; round++ {
		// A marker in Git says the operator watches again, so the round's deletion is an
		// event it sees, not one made while it was down.
		marker := fmt.Sprintf("mark%d", round)
		burst(t, "kill-a", marker, 1, "up")
		waitObjects(t, remote, "live", "kill-a", marker, 1, "up", 2*time.Minute)
		applied := burstAsync("kill-a", "cm", 100, fmt.Sprintf("r%d", round))
		kubectl(t, "", "delete", "configmap", "-n", "kill-a", fmt.Sprintf("gone-%d", round))
		time.Sleep(time.Duration(200+rng.Intn(1500)) * time.Millisecond)
		require.NoError(t, op.cmd.Process.Signal(syscall.SIGKILL))
		<-op.done
		require.NoError(t, <-applied)
		op = startOperator(t, work)
	}
	burst(t, "kill-a", "cm", 100, "final")
	waitObjects(t, remote, "live", "kill-a", "cm", 100, "final", 3*time.Minute)
	eventually(t, 2*time.Minute, "the deletions seen before each kill in Git", func() (bool, string) {
		var left []string
		for i := range 5 {
			if _, ok := fileAt(remote, fmt.Sprintf("live/kill-a/configmaps/gone-%d.yaml", i)); ok {
				left = append(left, fmt.Sprintf("gone-%d", i))
			}
		}
		return len(left) == 0, "still in Git: " + strings.Join(left, ", ")
	})
	assertFolderEqualsCluster(t, remote, "live", "kill-a")
	assertLinear(t, remote)
	fsck(t, remote)
	// The operator's own clone, after five kills; stopped first, since a running one fetches
	// and perhaps compacts it.
	op.stop()
	git(t, cloneOf(t, work, remote), "fsck", "--full", "--strict")
}

// assertFolderEqualsCluster checks that folder holds exactly one file per ConfigMap of ns in
// the cluster (kube-root-ca.crt, which the operator never writes, aside), each a single
// document with the object's data: nothing missing, stale or written twice.
func assertFolderEqualsCluster(t *testing.T, remote, folder, ns string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", shared.kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	want := map[string]map[string]string{}
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			want[fmt.Sprintf("%s/%s/configmaps/%s.yaml", folder, ns, cm.Name)] = cm.Data
		}
	}
	got := map[string]map[string]string{}
	for f, content := range filesUnder(remote, folder+"/"+ns) {
		assert.Equal(t, 1, strings.Count(content, "kind: ConfigMap"), "one document in %s", f)
		var doc corev1.ConfigMap
		require.NoError(t, yaml.Unmarshal([]byte(content), &doc), f)
		got[f] = doc.Data
	}
	assert.Equal(t, want, got, "the folder is the cluster's ConfigMaps of %s, object by object", ns)
}

func TestRemoteOutageDuringABurstLandsAfterwards(t *testing.T) {
	remote := newRemote(t)
	startOperator(t, t.TempDir())
	setupTarget(t, "down-a", remote, "live", "0s")
	watchConfigMaps(t, "down-a", "")
	applied := burstAsync("down-a", "cm", 300, "during")
	eventually(t, time.Minute, "the burst's first commit", func() (bool, string) {
		return len(folderFiles(remote, "live")) > 0, "none yet"
	})
	server := serverOf(t, remote)
	server.Stop() // connections refused from now on, for 30 s
	down := time.Now()
	t.Logf("the remote went away with %d of 300 objects in Git", len(folderFiles(remote, "live")))
	require.NoError(t, <-applied)
	eventually(t, 30*time.Second, "the outage in the GitTarget's status", func() (bool, string) {
		reason, _ := kubectlErr("", "-n", "down-a", "get", "gittarget", "live", "-o",
			`jsonpath={.status.conditions[?(@.type=="Reconciling")].reason}`)
		return reason == "WriteFailed" || reason == "Unreachable", reason
	})
	time.Sleep(time.Until(down.Add(30 * time.Second)))
	server.Start()
	waitObjects(t, remote, "live", "down-a", "cm", 300, "during", 4*time.Minute)
	eventually(t, time.Minute, "Ready again", func() (bool, string) {
		status, _ := kubectlErr("", "-n", "down-a", "get", "gittarget", "live", "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return status == "True", status
	})
	assert.Len(t, folderFiles(remote, "live"), 300, "every object once, nothing else")
	assertNoDuplicateDocuments(t, remote, "live")
	assertLinear(t, remote)
	fsck(t, remote)
}

func TestTwoProvidersOnOneRepositoryShareOneWorker(t *testing.T) {
	remote := newRemote(t)
	work := t.TempDir()
	op := startOperator(t, work)
	setupTarget(t, "two-a", remote, "team-a", "0s")
	// The same repository spelled differently: one worker after URL normalisation.
	kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: two-b
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: GitProvider
metadata:
  name: repo
  namespace: two-b
spec:
  url: %s/
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: live
  namespace: two-b
spec:
  providerRef:
    name: repo
  branch: main
  path: team-b
  commitWindow:
    quiet: 0s
`, remoteURL(t, remote)), "apply", "-f", "-")
	kubectl(t, "", "-n", "two-b", "wait", "--for=condition=Ready", "--timeout=60s", "gittarget/live")
	watchConfigMaps(t, "two-a", "")
	watchConfigMaps(t, "two-b", "")
	applied := burstAsync("two-a", "cm", 100, "a")
	burst(t, "two-b", "cm", 100, "b")
	require.NoError(t, <-applied)
	waitObjects(t, remote, "team-a", "two-a", "cm", 100, "a", 3*time.Minute)
	waitObjects(t, remote, "team-b", "two-b", "cm", 100, "b", 3*time.Minute)
	assert.Len(t, clonesOf(t, work, remote), 1, "one worker, on one clone, for both providers")
	assert.NotContains(t, op.logs.String(), "remote moved", "one worker per repository and branch never races itself")
	assertLinear(t, remote)
	fsck(t, remote)
}

// TestCloneIsCompactedToTheTipAndKeepsDelivering lowers the compaction threshold so the
// writer compacts its clone every few commits, kills it at random moments (some land during
// a compaction), and has a human restore a file's old content outside the folder, a blob
// the shallow clone no longer has: the fetch must bring it, or the next compaction fails.
func TestCloneIsCompactedToTheTipAndKeepsDelivering(t *testing.T) {
	remote := newRemote(t)
	work := t.TempDir()
	compactEvery := []string{"--clone-compaction-loose-objects", "20"}
	ops := []*operator{startOperator(t, work, compactEvery...)}
	setupTarget(t, "compact-a", remote, "live", "0s")
	watchConfigMaps(t, "compact-a", "")
	seed := time.Now().UnixNano()
	t.Logf("kill moments from seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 9; round++ {
		value := fmt.Sprintf("r%d", round)
		if round%3 == 1 {
			applied := burstAsync("compact-a", "cm", 5, value)
			time.Sleep(time.Duration(50+rng.Intn(400)) * time.Millisecond)
			op := ops[len(ops)-1]
			require.NoError(t, op.cmd.Process.Signal(syscall.SIGKILL))
			<-op.done
			require.NoError(t, <-applied)
			ops = append(ops, startOperator(t, work, compactEvery...))
		} else {
			burst(t, "compact-a", "cm", 5, value)
		}
		waitObjects(t, remote, "live", "compact-a", "cm", 5, value, time.Minute)
		if round == 4 {
			// The file as its first commit wrote it: rounds of history ago, far behind the
			// clone's shallow tip (how many commits each round made depends on timing, so no
			// fixed main~N surely holds it).
			first := strings.Fields(git(t, remote, "log", "--reverse", "--format=%H", "main", "--", "live/compact-a/configmaps/cm-0.yaml"))
			require.NotEmpty(t, first)
			old := git(t, remote, "show", first[0]+":live/compact-a/configmaps/cm-0.yaml")
			require.Contains(t, old, "r0")
			// Reachability bitmaps, as hosted remotes have: a remote not told the clone is
			// shallow would then leave out a blob the clone's tip has in its history.
			git(t, remote, "repack", "-a", "-d", "-b", "-q")
			pushOutsideTheFolder(t, remote, "other/restored.yaml", old)
		}
	}

	var logs strings.Builder
	for _, op := range ops {
		logs.WriteString(op.logs.String())
	}
	compacted := 0
	// The log names the normalised URL, without ".git", as a JSON field.
	repository := fmt.Sprintf("%q", strings.TrimSuffix(remoteURL(t, remote), ".git"))
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "compacted the local clone to the tip") && strings.Contains(line, repository) {
			compacted++
		}
	}
	assert.GreaterOrEqual(t, compacted, 2, "the clone was compacted again and again")
	var failures []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "compacting the local clone") {
			failures = append(failures, line)
		}
	}
	assert.Empty(t, failures, "no compaction failed")
	clone := cloneOf(t, work, remote)
	counts := git(t, clone, "count-objects", "-v")
	assert.Regexp(t, `(?m)^count: ([0-9]|[1-3][0-9])$`, counts, "loose objects stay near the threshold")
	assert.FileExists(t, filepath.Join(clone, "shallow"))
	git(t, clone, "fsck", "--full", "--strict", "--no-dangling")
	assert.Contains(t, git(t, remote, "log", "--format=%s", "main"), "restore an old file")
	assertNoDuplicateDocuments(t, remote, "live")
	assertLinear(t, remote)
	fsck(t, remote)
}

// cloneOf finds the operator's clone of remote in work (the work dir holds one per
// repository and branch of every GitTarget in the cluster, other tests' too).
func cloneOf(t *testing.T, work, remote string) string {
	t.Helper()
	dirs := clonesOf(t, work, remote)
	require.Len(t, dirs, 1, "one clone of %s in %s", remote, work)
	return filepath.Join(work, dirs[0])
}

// pushOutsideTheFolder commits file with content to main as a human, retrying when the
// operator pushed first.
func pushOutsideTheFolder(t *testing.T, remote, file, content string) {
	t.Helper()
	dir := t.TempDir()
	out, err := execGit(dir, "clone", "-q", remote, ".")
	require.NoError(t, err, out)
	require.NoError(t, writeFile(filepath.Join(dir, file), content))
	for _, args := range [][]string{{"add", file}, {"-c", "user.name=Human", "-c", "user.email=h@example.com", "commit", "-q", "-m", "restore an old file"}} {
		out, err := execGit(dir, args...)
		require.NoError(t, err, out)
	}
	for attempt := 0; attempt < 50; attempt++ {
		if _, err := execGit(dir, "push", "-q", "origin", "HEAD:main"); err == nil {
			return
		}
		out, err := execGit(dir, "-c", "user.name=Human", "-c", "user.email=h@example.com", "pull", "-q", "--rebase", "origin", "main")
		require.NoError(t, err, out)
	}
	t.Fatalf("could not push %s", file)
}
