// Package repotest provides real Git fixtures for tests: bare repositories made
// with the git CLI, a smart-HTTP server backed by `git http-backend` on
// 127.0.0.1, and scratch clones that push commits "from someone else".
//
// The git CLI is used here only as an independent observer and fixture maker;
// the product itself writes with go-git. Every helper takes a testing.TB and
// fails the test on error, so callers stay short. Nothing here keeps
// package-level state; every fixture lives under t.TempDir() and is cleaned up
// by the testing package.
package repotest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fixture identity used by every commit the git CLI makes here, so that tests
// can tell fixture commits from product commits.
const (
	FixtureName  = "Fixture Person"
	FixtureEmail = "fixture@example.com"
)

// Remote is a bare repository on disk plus the URL clients use to reach it.
type Remote struct {
	t testing.TB
	// Dir is the bare repository on disk; inspect it with Git(t, Dir, ...).
	Dir string
	// URL is what the code under test uses (credentials, if any, go in an
	// AuthMethod, never in the URL).
	URL string
	// CLIURL is URL with any basic-auth credentials embedded, for the git CLI.
	CLIURL string
}

// Option configures how NewHTTPRemote serves the repository.
type Option func(*serveConfig)

type serveConfig struct {
	user, password string
	middleware     []func(http.Handler) http.Handler
	// hiddenFrom maps a basic-auth user to the branch hidden from it (HideBranchFrom).
	hiddenFrom map[string]string
}

// WithBasicAuth makes the server demand these basic-auth credentials on every
// request, so tests can prove that wrong or missing credentials fail.
func WithBasicAuth(user, password string) Option {
	return func(c *serveConfig) { c.user, c.password = user, password }
}

// WithMiddleware wraps the git handler (inside the auth check), for example to
// push a conflicting commit just before a receive-pack request is served.
func WithMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(c *serveConfig) { c.middleware = append(c.middleware, mw) }
}

// HideBranchFrom hides a branch from the requests made as user (basic auth, which the
// server does not check unless WithBasicAuth says so), in fetches and pushes alike (git's
// transfer.hideRefs), as a server's per-branch read permission (Gerrit's) does; other
// users see it.
func HideBranchFrom(user, branch string) Option {
	return func(c *serveConfig) {
		if c.hiddenFrom == nil {
			c.hiddenFrom = map[string]string{}
		}
		c.hiddenFrom[user] = branch
	}
}

// GitPath returns the git executable, failing the test when git is missing:
// these tests need a real git and must not pass by skipping.
func GitPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("the git CLI is required by these tests: %v", err)
	}
	return p
}

// Git runs the git CLI in dir with an isolated configuration and a fixed
// identity, and returns its trimmed standard output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := RunGit(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return out
}

// RunGit is Git without failing the test, for commands that are expected to
// fail; the error carries stderr.
func RunGit(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	return RunGitEnv(t, dir, nil, args...)
}

// RunGitEnv is RunGit with env added to git's environment, for measurements that must set
// what the fixture's isolation leaves alone (the C library's tunables, say).
func RunGitEnv(t testing.TB, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	full := append([]string{
		"-c", "init.defaultBranch=main",
		"-c", "protocol.file.allow=always",
		"-c", "core.autocrlf=false",
		"-c", "advice.detachedHead=false",
	}, args...)
	cmd := exec.Command(GitPath(t), full...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(stdout.String()), &gitError{err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type gitError struct {
	err    error
	stderr string
}

func (e *gitError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }
func (e *gitError) Unwrap() error { return e.err }

// gitEnv isolates the fixture from the user's and the system's git config.
func gitEnv() []string {
	return append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"LC_ALL=C",
		"GIT_AUTHOR_NAME="+FixtureName,
		"GIT_AUTHOR_EMAIL="+FixtureEmail,
		"GIT_COMMITTER_NAME="+FixtureName,
		"GIT_COMMITTER_EMAIL="+FixtureEmail,
	)
}

// NewBareRepo creates an empty bare repository named name.git under root
// (`git init --bare`) that accepts anonymous smart-HTTP pushes.
func NewBareRepo(t testing.TB, root, name string) string {
	t.Helper()
	dir := filepath.Join(root, name+".git")
	Git(t, root, "init", "--quiet", "--bare", dir)
	Git(t, dir, "config", "http.receivepack", "true")
	return dir
}

// NewFileRemote creates an empty bare repository reached through a file:// URL.
func NewFileRemote(t testing.TB) *Remote {
	t.Helper()
	dir := NewBareRepo(t, t.TempDir(), "repo")
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	return &Remote{t: t, Dir: dir, URL: u, CLIURL: u}
}

// NewHTTPRemote creates an empty bare repository served over smart HTTP by
// `git http-backend` on 127.0.0.1; the server stops when the test ends.
func NewHTTPRemote(t testing.TB, opts ...Option) *Remote {
	t.Helper()
	var cfg serveConfig
	for _, o := range opts {
		o(&cfg)
	}
	root := t.TempDir()
	dir := NewBareRepo(t, root, "repo")
	base := NewServer(t, root, cfg.handlerWrappers(t, root)...).URL()
	remote := &Remote{t: t, Dir: dir, URL: base + "/repo.git", CLIURL: base + "/repo.git"}
	if cfg.user != "" {
		u, err := url.Parse(remote.URL)
		if err != nil {
			t.Fatalf("parse %s: %v", remote.URL, err)
		}
		u.User = url.UserPassword(cfg.user, cfg.password)
		remote.CLIURL = u.String()
	}
	return remote
}

// handlerWrappers orders the wrappers so that auth is checked first; a user a branch is
// hidden from is served by a backend of its own, which hides it.
func (c *serveConfig) handlerWrappers(t testing.TB, projectRoot string) []func(http.Handler) http.Handler {
	var wrappers []func(http.Handler) http.Handler
	if len(c.hiddenFrom) > 0 {
		hiding := map[string]http.Handler{}
		for user, branch := range c.hiddenFrom {
			hiding[user] = backend(t, projectRoot, nil,
				"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=transfer.hideRefs", "GIT_CONFIG_VALUE_0=refs/heads/"+branch)
		}
		wrappers = append(wrappers, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if user, _, ok := r.BasicAuth(); ok && hiding[user] != nil {
					hiding[user].ServeHTTP(w, r)
					return
				}
				next.ServeHTTP(w, r)
			})
		})
	}
	wrappers = append(wrappers, c.middleware...)
	if c.user != "" {
		wrappers = append(wrappers, BasicAuth(c.user, c.password))
	}
	return wrappers
}

// backend is `git http-backend` serving projectRoot, wrapped in order (the last wrapper
// sees a request first).
func backend(t testing.TB, projectRoot string, wrappers []func(http.Handler) http.Handler, env ...string) http.Handler {
	t.Helper()
	execPath := Git(t, projectRoot, "--exec-path")
	var h http.Handler = wholeBody(&cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Root: "/",
		Env: append([]string{
			"GIT_PROJECT_ROOT=" + projectRoot,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=" + os.DevNull,
		}, env...),
		Stderr: logWriter{t},
	})
	for _, w := range wrappers {
		h = w(h)
	}
	return h
}

// wholeBody hands next only requests whose body arrived whole, read into memory first,
// and answers 400 to one cut short (its client gone, or Stop closing the connection
// mid-push). git http-backend reads a body of CONTENT_LENGTH bytes and, given fewer,
// reads on at end of file for ever (git 2.39's pipe_fixed_length): a core spent, and
// Stop's wait for the request never ending.
func wholeBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil || (r.ContentLength >= 0 && int64(len(body)) != r.ContentLength) {
			http.Error(w, "request body cut short", http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// Server serves the repositories under a root over smart HTTP with `git http-backend` on
// a fixed loopback port, which Stop and Start take away and bring back: while it is
// stopped, clients meet refused connections, as during a real outage.
type Server struct {
	t       testing.TB
	handler http.Handler
	addr    string
	mu      sync.Mutex
	srv     *http.Server
	// serving counts the requests being served, under reqMu: Stop waits (idle) until none
	// is, so no backend writes to a repository, or logs, after the test that made it
	// ended. A counter, not a WaitGroup: a request may begin while Stop waits. stopped,
	// also under reqMu, turns away a request the listener took just before Stop closed it
	// and whose handler starts after Stop returned.
	reqMu   sync.Mutex
	idle    *sync.Cond
	serving int
	stopped bool
}

// NewServer serves every repository under projectRoot over smart HTTP with `git
// http-backend` (through net/http/cgi) on 127.0.0.1, until the test ends or Stop. Wrappers
// are applied in order, so the last one sees a request first.
func NewServer(t testing.TB, projectRoot string, wrappers ...func(http.Handler) http.Handler) *Server {
	t.Helper()
	s := &Server{t: t, addr: "127.0.0.1:0"}
	s.idle = sync.NewCond(&s.reqMu)
	h := backend(t, projectRoot, wrappers)
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reqMu.Lock()
		if s.stopped {
			s.reqMu.Unlock()
			http.Error(w, "stopped", http.StatusServiceUnavailable)
			return
		}
		s.serving++
		s.reqMu.Unlock()
		defer func() {
			s.reqMu.Lock()
			if s.serving--; s.serving == 0 {
				s.idle.Broadcast()
			}
			s.reqMu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's base URL; it stays the same across Stop and Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr
}

// Start serves again on the same port (a no-op while serving).
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("listening on %s: %v", s.addr, err)
	}
	s.addr = l.Addr().String()
	s.reqMu.Lock()
	s.stopped = false
	s.reqMu.Unlock()
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(l) }(s.srv)
}

// Stop closes the listener and every open connection, and waits for the requests being
// served to end (a no-op while stopped); one the listener took just before, whose handler
// had not started, is answered 503 without reaching the backend.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqMu.Lock()
	s.stopped = true // before the close: a request whose handler starts after it is turned away
	s.reqMu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	for s.serving > 0 {
		s.idle.Wait()
	}
}

// logWriter sends the server's stderr (expected rejections included) to the
// test log, where it shows only with -v or on failure.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("git http-backend: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// BasicAuth is middleware that answers 401 unless the request carries exactly
// these basic-auth credentials, like a Git hosting service would.
func BasicAuth(user, password string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// BeforeFirstPush runs fn once, just before the server handles the first
// receive-pack request (after the pusher has read the ref advertisement), to
// simulate another writer winning a race. Requests made by fn itself, and
// all later ones, pass straight through, so fn may push through this server.
func BeforeFirstPush(fn func()) Option {
	var (
		mu    sync.Mutex
		state int // 0: armed, 1: running fn, 2: done
	)
	return WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if IsReceivePack(r) {
				mu.Lock()
				run := state == 0
				if run {
					state = 1
				}
				mu.Unlock()
				if run {
					fn()
					mu.Lock()
					state = 2
					mu.Unlock()
				}
			}
			next.ServeHTTP(w, r)
		})
	})
}

// RefusePushesWhile answers every push with code and msg while refuse holds, as a server
// whose branch is protected or that is down for maintenance does; fetches go through.
func RefusePushesWhile(refuse *atomic.Bool, code int, msg string) Option {
	return WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if refuse.Load() && IsReceivePack(r) {
				http.Error(w, msg, code)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
}

// DownWhile answers every request, fetches and pushes alike, with 503 while down holds, as
// a server under maintenance does.
func DownWhile(down *atomic.Bool) Option {
	return WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
}

// IsReceivePack reports whether r is the POST that carries a push, so
// middleware can interfere exactly between ref advertisement and update.
func IsReceivePack(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack")
}

// Head returns the commit refs/heads/<branch> points to, or "" when the
// branch does not exist.
func (r *Remote) Head(branch string) string {
	r.t.Helper()
	out, err := RunGit(r.t, r.Dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if err != nil {
		return ""
	}
	return out
}

// Log returns "hash subject" lines of branch, newest first.
func (r *Remote) Log(branch string) []string {
	r.t.Helper()
	out := Git(r.t, r.Dir, "log", "--format=%H %s", "refs/heads/"+branch)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// Show returns the content of path at rev, as `git show rev:path` prints it.
func (r *Remote) Show(rev, path string) string {
	r.t.Helper()
	return Git(r.t, r.Dir, "show", rev+":"+path)
}

// LsTree returns `git ls-tree -r -t` of rev: mode, type, hash and path of
// every entry, trees included.
func (r *Remote) LsTree(rev string) string {
	r.t.Helper()
	return Git(r.t, r.Dir, "ls-tree", "-r", "-t", rev)
}

// Fsck fails the test unless `git fsck --full --strict` finds the repository
// clean; dangling objects are not errors.
func (r *Remote) Fsck() {
	r.t.Helper()
	out, err := RunGit(r.t, r.Dir, "fsck", "--full", "--strict", "--no-dangling", "--no-progress")
	if err != nil {
		r.t.Fatalf("git fsck found problems in %s: %v\n%s", r.Dir, err, out)
	}
}

// PushFiles makes a commit on branch with the git CLI from a fresh clone,
// writing files (path → content), and pushes it; it returns the new commit.
// It plays "another writer" racing with the code under test.
func (r *Remote) PushFiles(branch string, files map[string]string, message string) string {
	r.t.Helper()
	return pushFiles(r.Clone(branch), branch, files, message)
}

// Seed is PushFiles straight into Dir, bypassing the server (no middleware,
// no auth): for setting up state before the scenario under test.
func (r *Remote) Seed(branch string, files map[string]string, message string) string {
	r.t.Helper()
	return pushFiles(r.cloneFrom(r.Dir, branch), branch, files, message)
}

func pushFiles(c *Checkout, branch string, files map[string]string, message string) string {
	c.t.Helper()
	for p, content := range files {
		c.WriteFile(p, content)
	}
	return c.CommitAndPush(branch, message)
}

// Checkout is a scratch non-bare clone made with the git CLI.
type Checkout struct {
	t testing.TB
	// Dir is the work tree of the clone.
	Dir      string
	gitlinks map[string]string
}

// Clone clones the remote with the git CLI and checks out branch, starting an
// orphan branch when it does not exist yet (also in an empty repository).
func (r *Remote) Clone(branch string) *Checkout {
	r.t.Helper()
	return r.cloneFrom(r.CLIURL, branch)
}

func (r *Remote) cloneFrom(source, branch string) *Checkout {
	r.t.Helper()
	dir := r.t.TempDir()
	Git(r.t, dir, "clone", "--quiet", source, ".")
	c := &Checkout{t: r.t, Dir: dir, gitlinks: map[string]string{}}
	if Git(r.t, dir, "ls-remote", "--heads", "origin", branch) != "" {
		c.Git("checkout", "--quiet", "-B", branch, "origin/"+branch)
	} else {
		c.Git("checkout", "--quiet", "--orphan", branch)
	}
	return c
}

// Git runs the git CLI inside the clone.
func (c *Checkout) Git(args ...string) string {
	c.t.Helper()
	return Git(c.t, c.Dir, args...)
}

// WriteFile writes content to path (slash-separated, relative to the clone),
// creating parent directories.
func (c *Checkout) WriteFile(path, content string) {
	c.t.Helper()
	c.write(path, content, 0o644)
}

// WriteExecutable writes content to path with the executable bit set, so Git
// records mode 100755.
func (c *Checkout) WriteExecutable(path, content string) {
	c.t.Helper()
	c.write(path, content, 0o755)
}

func (c *Checkout) write(path, content string, mode os.FileMode) {
	c.t.Helper()
	full := filepath.Join(c.Dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		c.t.Fatalf("mkdir for %s: %v", path, err)
	}
	if err := os.WriteFile(full, []byte(content), mode); err != nil {
		c.t.Fatalf("write %s: %v", path, err)
	}
	if err := os.Chmod(full, mode); err != nil { // WriteFile keeps an existing file's mode
		c.t.Fatalf("chmod %s: %v", path, err)
	}
}

// Symlink creates a symbolic link at path pointing to target.
func (c *Checkout) Symlink(target, path string) {
	c.t.Helper()
	full := filepath.Join(c.Dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		c.t.Fatalf("mkdir for %s: %v", path, err)
	}
	if err := os.Symlink(target, full); err != nil {
		c.t.Fatalf("symlink %s: %v", path, err)
	}
}

// AddGitlink records a submodule entry (mode 160000) at path pointing to
// commit in the next commit, without needing the submodule's repository.
func (c *Checkout) AddGitlink(path, commit string) {
	c.t.Helper()
	c.gitlinks[path] = commit
}

// CommitAndPush commits everything in the work tree (plus any gitlinks) and
// pushes it to branch on origin, returning the new commit.
func (c *Checkout) CommitAndPush(branch, message string) string {
	c.t.Helper()
	c.Git("add", "--all")
	for path, commit := range c.gitlinks {
		c.Git("update-index", "--add", "--cacheinfo", "160000,"+commit+","+path)
	}
	c.Git("commit", "--quiet", "--allow-empty", "-m", message)
	c.Git("push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	return c.Git("rev-parse", "HEAD")
}
