package repo

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"
)

// sshDeadlineScheme is the proxy scheme SSH connections are dialled through so that the
// operation's deadline bounds the whole SSH session. go-git dials SSH without the
// operation's context and runs the SSH handshake and the session's start before it
// consults one: a server that accepts the connection and never answers would hold a
// fetch or push, and with it the clone's lock and its branch's writer, for ever.
const sshDeadlineScheme = "gitops-reverser-deadline"

func init() {
	// go-git builds an SSH connection's dialer from the proxy URL an operation names
	// (sshDeadline), through x/net/proxy's own registry of dialer types.
	proxy.RegisterDialerType(sshDeadlineScheme, deadlineDialerFor)
}

// sshDeadline is the proxy setting that bounds an SSH operation on rawURL by ctx's
// deadline; none for another kind of URL (go-git honours the context there) or a context
// without a deadline.
func sshDeadline(ctx context.Context, rawURL string) transport.ProxyOptions {
	until, ok := ctx.Deadline()
	if !ok || !strings.HasPrefix(NormalizeURL(rawURL), "ssh://") {
		return transport.ProxyOptions{}
	}
	return transport.ProxyOptions{URL: fmt.Sprintf("%s://deadline?until=%d", sshDeadlineScheme, until.UnixNano())}
}

// deadlineDialerFor builds the dialer of a sshDeadline proxy URL.
func deadlineDialerFor(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
	ns, err := strconv.ParseInt(u.Query().Get("until"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("reading the deadline of an SSH connection: %w", err)
	}
	return deadlineDialer{until: time.Unix(0, ns)}, nil
}

// deadlineDialer dials as go-git does without a proxy (through the one the environment
// names, ALL_PROXY, if any) and gives the connection a deadline: reads and writes after
// until fail, the handshake's included.
type deadlineDialer struct{ until time.Time }

// Dial implements proxy.Dialer.
func (d deadlineDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// DialContext implements proxy.ContextDialer, which go-git requires of a proxy's dialer.
func (d deadlineDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithDeadline(ctx, d.until)
	defer cancel()
	conn, err := proxy.Dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(d.until); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}
