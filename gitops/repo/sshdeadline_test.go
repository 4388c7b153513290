package repo_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// silentSSHServer accepts connections on 127.0.0.1 and never says a word, as a hung sshd
// or a proxy in front of a dead one does, and returns its ssh:// URL.
func silentSSHServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "ssh://git@" + l.Addr().String() + "/repo.git"
}

func TestAnSSHServerThatNeverAnswersFailsTheOperationAtItsDeadline(t *testing.T) {
	url := silentSSHServer(t)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := ssh.NewSignerFromKey(key)
	require.NoError(t, err)
	auth := &gitssh.PublicKeys{User: "git", Signer: signer,
		HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: ssh.FixedHostKey(signer.PublicKey())}}
	r, err := repo.Open(context.Background(), filepath.Join(t.TempDir(), "clone"), url, auth)
	require.NoError(t, err)
	someone := object.Signature{Name: "alice", Email: "alice@example.com", When: time.Now()}
	tip, err := r.Commit(plumbing.ZeroHash, map[string][]byte{"live/a.yaml": []byte("a: 1\n")}, someone, someone, "a commit to push")
	require.NoError(t, err)

	for name, op := range map[string]func(ctx context.Context) error{
		"a fetch":       func(ctx context.Context) error { _, err := r.Fetch(ctx, "main"); return err },
		"a push":        func(ctx context.Context) error { return r.PushWithin(ctx, 0, "main", tip, plumbing.ZeroHash) },
		"a ref listing": func(ctx context.Context) error { return repo.LsRemote(ctx, url, auth) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			ended := make(chan error, 1)
			go func() { ended <- op(ctx) }()
			select {
			case err := <-ended:
				assert.Error(t, err)
			case <-time.After(30 * time.Second): // a bound on a hang, not a measure of speed
				t.Fatal("still waiting for the server long after the operation's deadline")
			}
		})
	}
}
