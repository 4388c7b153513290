package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// operator is one running instance of the real binary.
type operator struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startOperator runs the binary with a work dir that survives restarts within one test.
func startOperator(t *testing.T, workDir string, extraArgs ...string) *operator {
	t.Helper()
	return startReplica(t, workDir, shared.webhookPort, shared.certDir, extraArgs...)
}

// startReplica runs the binary serving its webhook on port with its certificates in
// certDir; only shared.webhookPort is the one the API server calls.
func startReplica(t *testing.T, workDir string, port int, certDir string, extraArgs ...string) *operator {
	t.Helper()
	args := []string{
		"--kubeconfig", shared.operatorKubeconfig,
		"--work-dir", workDir,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--git-poll-interval", "2s",
		"--namespace", operatorNamespace,
		"--webhook-cert-extra-ips", "127.0.0.1",
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(port),
		"--webhook-cert-dir", certDir,
		"--webhook-configuration-name", webhookConfigName,
		"--mutating-webhook-configuration-name", webhookConfigName,
	}
	cmd := exec.Command(shared.binary, append(args, extraArgs...)...)
	op := &operator{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = op.logs, op.logs
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(op.done) }()
	t.Cleanup(func() {
		op.stop()
		if t.Failed() {
			t.Logf("operator logs (webhook port %d):\n%s", port, op.logs.String())
		}
	})
	ca, err := injectedCABundle(30 * time.Second)
	require.NoError(t, err, op.logs.String())
	require.NoError(t, waitTLS(port, ca, 30*time.Second), op.logs.String())
	return op
}

// stop sends SIGTERM and waits for a clean exit.
func (o *operator) stop() {
	select {
	case <-o.done:
		return
	default:
	}
	_ = o.cmd.Process.Signal(os.Interrupt)
	select {
	case <-o.done:
	case <-time.After(20 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
}

// kubectl runs the machine's kubectl against the test control plane.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectlErr(stdin, args...)
	require.NoError(t, err, "kubectl %s\n%s", strings.Join(args, " "), out)
	return out
}

func kubectlErr(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", shared.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// git runs the git CLI as an observer of the remote.
func git(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	out, err := gitErr(gitDir, args...)
	require.NoError(t, err, "git %s\n%s", strings.Join(args, " "), out)
	return out
}

func gitErr(gitDir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"--git-dir", gitDir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+shared.dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// newRemote makes an empty bare repository, served over smart HTTP by `git http-backend`
// on 127.0.0.1 (remoteURL: what the operator dials), and returns its path, where the git CLI
// observes it. The server stops when the test ends (serverOf stops it sooner). Its name is
// its own: earlier tests' GitTargets stay in the cluster, and a port used again must not
// make one of them name this repository.
func newRemote(t *testing.T) string {
	t.Helper()
	return newRemoteWith(t)
}

// newRemoteWith is newRemote with the server's handler wrapped (repotest.NewServer).
func newRemoteWith(t *testing.T, wrappers ...func(http.Handler) http.Handler) string {
	t.Helper()
	root := t.TempDir()
	dir := repotest.NewBareRepo(t, root, fmt.Sprintf("remote-%d", shared.remotes.Add(1)))
	shared.servers.Store(dir, repotest.NewServer(t, root, wrappers...))
	return dir
}

// serverOf is the server of a repository newRemote made.
func serverOf(t *testing.T, remote string) *repotest.Server {
	t.Helper()
	s, ok := shared.servers.Load(remote)
	require.True(t, ok, "%s was not made by newRemote", remote)
	return s.(*repotest.Server)
}

// remoteURL is the URL of a repository newRemote made.
func remoteURL(t *testing.T, remote string) string {
	t.Helper()
	return serverOf(t, remote).URL() + "/" + filepath.Base(remote)
}

// commits lists the subjects on main, newest first; none when the branch does not exist.
func commits(t *testing.T, remote string) []string {
	t.Helper()
	out, err := gitErr(remote, "log", "--format=%s", "main")
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

// fileAt returns the file's content on main, or "" with false when it does not exist.
func fileAt(remote, path string) (string, bool) {
	out, err := gitErr(remote, "show", "main:"+path)
	return out, err == nil
}

// eventually retries cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
}

// fsck checks the remote with git's own integrity checker.
func fsck(t *testing.T, remote string) {
	t.Helper()
	git(t, remote, "fsck", "--full", "--strict")
}

// setupTarget applies a namespace, GitProvider and GitTarget pointing at remote, waits for
// Ready and returns the namespace.
func setupTarget(t *testing.T, ns, remote, path, quiet string) {
	t.Helper()
	kubectl(t, targetManifest(ns, remoteURL(t, remote), path, quiet, ""), "apply", "-f", "-")
	kubectl(t, "", "-n", ns, "wait", "--for=condition=Ready", "--timeout=60s", "gitprovider/repo", "gittarget/live")
}

// targetManifest is the namespace, GitProvider and GitTarget of setupTarget, on the
// repository at url; extraSpec is appended to the GitTarget's spec (indented by two spaces).
func targetManifest(ns, url, path, quiet, extraSpec string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: GitProvider
metadata:
  name: repo
  namespace: %[1]s
spec:
  url: %[2]s
  allowedBranches: ["main"]
---
apiVersion: reverser.gitops.dev/v1alpha1
kind: GitTarget
metadata:
  name: live
  namespace: %[1]s
spec:
  providerRef:
    name: repo
  branch: main
  path: %[3]s
  commitWindow:
    quiet: %[4]s
%[5]s`, ns, url, path, quiet, extraSpec)
}

func execGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+shared.dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// seedFile commits content at path on main of remote, as a person would with the git CLI.
func seedFile(t *testing.T, remote, path, content string) {
	t.Helper()
	seed := t.TempDir()
	out, err := execGit(seed, "clone", remote, ".")
	require.NoError(t, err, out)
	require.NoError(t, writeFile(filepath.Join(seed, path), content))
	for _, args := range [][]string{{"add", "."}, {"-c", "user.name=H", "-c", "user.email=h@x", "commit", "-m", "hand-written"}, {"push", "origin", "HEAD:main"}} {
		out, err := execGit(seed, args...)
		require.NoError(t, err, out)
	}
}
