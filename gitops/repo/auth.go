package repo

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
)

// Secret data keys, as Flux's GitRepository uses them, so existing Secrets work.
const (
	KeyUsername    = "username"
	KeyPassword    = "password"
	KeyBearerToken = "bearerToken"
	KeyIdentity    = "identity"
	KeyKnownHosts  = "known_hosts"
)

// defaultSSHUser is what Git hosting services expect when the URL names none.
const defaultSSHUser = "git"

// AuthFromSecret turns a Kubernetes Secret's data (Flux-style keys) into
// go-git credentials for url. HTTP(S): username+password give basic auth,
// bearerToken gives token auth, nothing gives nil (anonymous). SSH (ssh://
// or scp-like): identity (private key, with password as its passphrase) and
// known_hosts are both required; host keys are always verified, so a missing
// known_hosts fails closed with ErrNoKnownHosts. file:// and other schemes
// give nil. Errors wrap ErrInvalidSecret or ErrNoKnownHosts and never contain
// secret values.
func AuthFromSecret(url string, data map[string][]byte) (transport.AuthMethod, error) {
	norm := NormalizeURL(url)
	switch {
	case strings.HasPrefix(norm, "http://"), strings.HasPrefix(norm, "https://"):
		auth, err := httpAuth(data)
		if auth == nil && err == nil {
			_, auth = splitCredentials(url, nil)
		}
		return auth, err
	case strings.HasPrefix(norm, "ssh://"):
		return sshAuth(norm, data)
	default:
		return nil, nil
	}
}

// splitCredentials moves the user info of an http(s) URL into basic auth, as go-git would
// use it, unless auth is already set (then the URL's user info is ignored, as go-git does).
// The URL returned has no user info, so it can be kept in the clone's config and compared
// and shown without credentials. An ssh URL keeps its user name, which selects the account
// and carries no secret, and loses a password, which is never used (the key comes from the
// Secret). Other URLs are returned as they are.
func splitCredentials(raw string, auth transport.AuthMethod) (string, transport.AuthMethod) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw, auth
	}
	if _, hasPassword := u.User.Password(); u.Scheme == "ssh" && hasPassword {
		u.User = url.User(u.User.Username())
		return u.String(), auth
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return raw, auth
	}
	if auth == nil && u.User.Username() != "" {
		password, _ := u.User.Password()
		auth = &githttp.BasicAuth{Username: u.User.Username(), Password: password}
	}
	u.User = nil
	return u.String(), auth
}

// httpAuth picks basic or token auth; mixing them is ambiguous and refused.
func httpAuth(data map[string][]byte) (transport.AuthMethod, error) {
	user, pass, token := data[KeyUsername], data[KeyPassword], data[KeyBearerToken]
	switch {
	case len(token) > 0 && (len(user) > 0 || len(pass) > 0):
		return nil, fmt.Errorf("%w: set either %s or %s+%s, not both", ErrInvalidSecret, KeyBearerToken, KeyUsername, KeyPassword)
	case len(token) > 0:
		return &githttp.TokenAuth{Token: string(token)}, nil
	case len(user) > 0 && len(pass) > 0:
		return &githttp.BasicAuth{Username: string(user), Password: string(pass)}, nil
	case len(user) > 0 || len(pass) > 0:
		return nil, fmt.Errorf("%w: %s and %s must be set together", ErrInvalidSecret, KeyUsername, KeyPassword)
	default:
		return nil, nil
	}
}

// sshAuth builds public-key auth pinned to the hosts in known_hosts.
func sshAuth(normURL string, data map[string][]byte) (transport.AuthMethod, error) {
	u, err := url.Parse(normURL)
	if err != nil {
		return nil, fmt.Errorf("%w: unparseable ssh url", ErrInvalidSecret)
	}
	hostPort := net.JoinHostPort(u.Hostname(), portOr(u.Port(), "22"))
	khData := data[KeyKnownHosts]
	if len(bytes.TrimSpace(khData)) == 0 {
		return nil, fmt.Errorf("%w: key %s is missing or empty", ErrNoKnownHosts, KeyKnownHosts)
	}
	if len(data[KeyIdentity]) == 0 {
		return nil, fmt.Errorf("%w: key %s (private key) is missing", ErrInvalidSecret, KeyIdentity)
	}
	db, err := knownHostsDB(khData)
	if err != nil {
		return nil, err
	}
	algos := db.HostKeyAlgorithms(hostPort)
	if len(algos) == 0 {
		return nil, fmt.Errorf("%w: %s has no entry for %s", ErrNoKnownHosts, KeyKnownHosts, hostPort)
	}
	keys, err := gitssh.NewPublicKeys(sshUser(u), data[KeyIdentity], string(data[KeyPassword]))
	if err != nil {
		return nil, fmt.Errorf("%w: key %s: %w", ErrInvalidSecret, KeyIdentity, err)
	}
	keys.HostKeyCallback = db.HostKeyCallback()
	keys.HostKeyAlgorithms = algos
	return keys, nil
}

// sshUser is the URL's user, or "git".
func sshUser(u *url.URL) string {
	if u.User != nil && u.User.Username() != "" {
		return u.User.Username()
	}
	return defaultSSHUser
}

// portOr returns port, or def when empty.
func portOr(port, def string) string {
	if port == "" {
		return def
	}
	return port
}

// knownHostsDB parses known_hosts content. The parser only reads files, so
// the (public) content goes through a temporary file removed at once.
func knownHostsDB(content []byte) (*knownhosts.HostKeyDB, error) {
	f, err := os.CreateTemp("", "known_hosts-*")
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", KeyKnownHosts, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, werr := f.Write(content)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("parse %s: %w", KeyKnownHosts, err)
	}
	db, err := knownhosts.NewDB(f.Name())
	if err != nil {
		// Named as the Secret's key, not as the file, whose name is new at every call: the
		// error reaches status, and a message that changed requeues the object at once.
		return nil, fmt.Errorf("%w: parse %s: %s", ErrInvalidSecret, KeyKnownHosts, strings.ReplaceAll(err.Error(), f.Name(), KeyKnownHosts))
	}
	return db, nil
}
