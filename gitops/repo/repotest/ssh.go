package repotest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHRemote is a bare repository served over SSH on 127.0.0.1 by an
// in-process server that runs git-upload-pack / git-receive-pack, so tests
// can exercise key authentication and host-key verification for real.
type SSHRemote struct {
	*Remote
	// IdentityPEM is an unencrypted private key the server accepts (the
	// Secret's `identity`).
	IdentityPEM []byte
	// KnownHosts is a known_hosts line for the server's host key (the
	// Secret's `known_hosts`).
	KnownHosts []byte
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey
}

// NewSSHRemote creates an empty bare repository and serves it over SSH at
// ssh://git@127.0.0.1:<port>/repo.git until the test ends. The git CLI side
// (Clone, PushFiles) bypasses SSH and works on the directory directly.
func NewSSHRemote(t testing.TB) *SSHRemote {
	t.Helper()
	root := t.TempDir()
	dir := NewBareRepo(t, root, "repo")
	clientKey, identity := NewSSHKey(t)
	hostSigner, _ := NewSSHKey(t)
	srv := &sshServer{t: t, root: root, execPath: Git(t, root, "--exec-path"), client: clientKey.PublicKey()}
	addr := srv.start(hostSigner)
	hostLine := knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostSigner.PublicKey())
	return &SSHRemote{
		Remote:      &Remote{t: t, Dir: dir, URL: "ssh://git@" + addr + "/repo.git", CLIURL: dir},
		IdentityPEM: identity,
		KnownHosts:  []byte(hostLine + "\n"),
		HostKey:     hostSigner.PublicKey(),
	}
}

// NewSSHKey generates an ed25519 key and returns its signer and its
// unencrypted OpenSSH PEM encoding.
func NewSSHKey(t testing.TB) (ssh.Signer, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("signer: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatalf("marshal key: %v", err)
	}
	return signer, pem.EncodeToMemory(block)
}

type sshServer struct {
	t        testing.TB
	root     string
	execPath string
	client   ssh.PublicKey
	wg       sync.WaitGroup
}

// start listens on 127.0.0.1 and serves until the test's cleanup.
func (s *sshServer) start(host ssh.Signer) string {
	cfg := &ssh.ServerConfig{PublicKeyCallback: s.authorize}
	cfg.AddHostKey(host)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatalf("listen: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	s.t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.serveConn(c, cfg) }()
		}
	}()
	return ln.Addr().String()
}

// authorize accepts only the generated client key.
func (s *sshServer) authorize(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	if string(key.Marshal()) == string(s.client.Marshal()) {
		return &ssh.Permissions{}, nil
	}
	return nil, errors.New("unknown public key")
}

func (s *sshServer) serveConn(c net.Conn, cfg *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		_ = c.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serveSession(ch, chReqs) }()
	}
}

// serveSession waits for the exec request and runs the git service.
func (s *sshServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer func() { _ = ch.Close() }()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(req.Type == "env", nil)
			continue
		}
		cmd, err := s.command(req.Payload)
		_ = req.Reply(err == nil, nil)
		if err != nil {
			_, _ = fmt.Fprintln(ch.Stderr(), err)
			sendExit(ch, 1)
			return
		}
		sendExit(ch, run(cmd, ch))
		return
	}
}

// command maps "git-upload-pack '/repo.git'" to the service under root.
func (s *sshServer) command(payload []byte) (*exec.Cmd, error) {
	if len(payload) < 4 {
		return nil, errors.New("bad exec payload")
	}
	line := string(payload[4:])
	service, arg, ok := strings.Cut(line, " ")
	if !ok || (service != "git-upload-pack" && service != "git-receive-pack") {
		return nil, fmt.Errorf("command not allowed: %q", line)
	}
	rel := path.Clean("/" + strings.Trim(arg, "'\""))
	return exec.Command(filepath.Join(s.execPath, service), filepath.Join(s.root, filepath.FromSlash(rel))), nil
}

// run connects the service to the channel and returns its exit code.
func run(cmd *exec.Cmd, ch ssh.Channel) int {
	cmd.Env = gitEnv()
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	if err := cmd.Start(); err != nil {
		return 1
	}
	go func() { _, _ = io.Copy(stdin, ch); _ = stdin.Close() }()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		return 1
	}
	return 0
}

func sendExit(ch ssh.Channel, code int) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(code))
	_, _ = ch.SendRequest("exit-status", false, b[:])
}
