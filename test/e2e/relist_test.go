package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The suite's API server watches PodTemplates straight from etcd (no watch cache) and
// compacts etcd every second (see runSuite), so a watch resumed after a cut of a few
// seconds has lost its history: the server answers 410 Gone and the informer must list
// again. No other test uses PodTemplates.

// TestChangesMadeWhileTheWatchWasCutReachGitAfterTheRelist cuts the operator off the API
// server (a TCP proxy between them drops every connection), changes, deletes and creates
// objects meanwhile, makes sure their history is compacted away, and restores the
// connection: the informer re-lists, and Git follows the cluster — the change, the delete
// (a tombstone of the re-list) and the new object — without touching the unchanged one.
func TestChangesMadeWhileTheWatchWasCutReachGitAfterTheRelist(t *testing.T) {
	const ns = "relist"
	remote := newRemote(t)
	proxy := newCuttableProxy(t, apiServerAddress(t))
	startOperator(t, t.TempDir(), "--kubeconfig", proxiedKubeconfig(t, proxy.addr()))
	setupTarget(t, ns, remote, "live", "0s")
	watchRule(t, ns, "podtemplates", `"podtemplates"`)
	for _, name := range []string{"changed", "deleted", "kept", "removed-in-git"} {
		kubectl(t, podTemplate(ns, name, "v1"), "apply", "-f", "-")
	}
	path := func(name string) string { return "live/" + ns + "/podtemplates/" + name + ".yaml" }
	for _, name := range []string{"changed", "deleted", "kept", "removed-in-git"} {
		waitFile(t, remote, path(name), func(string) bool { return true })
	}
	kept, _ := fileAt(remote, path("kept"))

	proxy.cut()
	// Past whatever the operator saw before the cut (the last object's event, a bookmark):
	// a list's resourceVersion is the store's at the time. Its watch resumes from no later.
	list, err := kubernetes.NewForConfigOrDie(shared.env.Config).CoreV1().PodTemplates(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	seen := list.ResourceVersion
	kubectl(t, podTemplate(ns, "changed", "v2"), "apply", "-f", "-")
	kubectl(t, "", "-n", ns, "delete", "podtemplate", "deleted")
	kubectl(t, podTemplate(ns, "created", "v1"), "apply", "-f", "-")
	// A person removes a file of an object that did not change: only comparing the list with
	// the folder, as at start, brings it back.
	person := t.TempDir()
	for _, args := range [][]string{{"clone", "--quiet", remote, "."}, {"rm", "--quiet", path("removed-in-git")},
		{"-c", "user.name=H", "-c", "user.email=h@x", "commit", "--quiet", "-m", "remove a file by hand"}, {"push", "--quiet", "origin", "HEAD:main"}} {
		out, err := execGit(person, args...)
		require.NoError(t, err, out)
	}
	waitHistoryCompacted(t, ns, seen)
	proxy.restore()

	// The informer reconnects after its backoff, which grew while the proxy was cut (up to
	// 30 s, with jitter): the first change may take that long on top of a commit.
	eventually(t, 3*commitWait, path("changed")+" at v2", func() (bool, string) {
		c, ok := fileAt(remote, path("changed"))
		return ok && strings.Contains(c, "image: registry.example/app:v2"), c
	})
	waitFile(t, remote, path("created"), func(string) bool { return true })
	eventually(t, commitWait, path("deleted")+" removed", func() (bool, string) {
		_, ok := fileAt(remote, path("deleted"))
		return !ok, "still present"
	})
	waitFile(t, remote, path("removed-in-git"), func(string) bool { return true })
	now, _ := fileAt(remote, path("kept"))
	assert.Equal(t, kept, now, "the re-list leaves an unchanged object's file as it was")
	fsck(t, remote)
}

// podTemplate is a PodTemplate whose container runs image tag tag.
func podTemplate(ns, name, tag string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PodTemplate
metadata:
  name: %[2]s
  namespace: %[1]s
template:
  metadata:
    labels:
      app: %[2]s
  spec:
    containers:
    - name: app
      image: registry.example/app:%[3]s
`, ns, name, tag)
}

// waitHistoryCompacted waits until a watch of ns's PodTemplates from resource version rv
// fails with 410 Gone, as the operator's resumed watch then will: the API server's own
// answer, observed with an independent client.
func waitHistoryCompacted(t *testing.T, ns, rv string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(shared.env.Config)
	eventually(t, 30*time.Second, "a watch from resource version "+rv+" to expire", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		w, err := cs.CoreV1().PodTemplates(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err), err.Error()
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type != watch.Error {
				continue // history still there: the events since rv
			}
			err := apierrors.FromObject(ev.Object)
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err), err.Error()
		}
		return false, "the watch delivered history"
	})
}

// apiServerAddress is host:port of the suite's API server.
func apiServerAddress(t *testing.T) string {
	t.Helper()
	u := shared.env.ControlPlane.APIServer.SecureServing.ListenAddr
	require.NotEmpty(t, u.Port, "the API server's port")
	return net.JoinHostPort(u.Address, u.Port)
}

// proxiedKubeconfig is the operator's kubeconfig with the API server at addr.
func proxiedKubeconfig(t *testing.T, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(shared.operatorKubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	path := filepath.Join(t.TempDir(), "proxied.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// cuttableProxy forwards TCP connections from a loopback port to an address. While cut it
// closes every open connection and every new one at once, as a network partition the
// client notices would; TLS passes through untouched.
type cuttableProxy struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	isCut  bool
	conns  map[net.Conn]bool
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cuttableProxy{target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	return p
}

func (p *cuttableProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttableProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go p.forward(c)
	}
}

// forward pipes c to a new connection to the target until either side ends.
func (p *cuttableProxy) forward(c net.Conn) {
	if !p.track(c) {
		_ = c.Close()
		return
	}
	defer p.untrack(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done // one direction ended: end both
}

// track registers an open connection; false when the proxy is cut.
func (p *cuttableProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isCut {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *cuttableProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

// cut closes every connection and refuses new ones until restore.
func (p *cuttableProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *cuttableProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
}
