package repo_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestLsRemoteChecksCredentialsAndAcceptsAnEmptyRepository(t *testing.T) {
	remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
	ctx := context.Background()

	err := repo.LsRemote(ctx, remote.URL, nil)
	require.ErrorIs(t, err, transport.ErrAuthenticationRequired, "missing credentials")

	err = repo.LsRemote(ctx, remote.URL, &githttp.BasicAuth{Username: "alice", Password: "wrong"})
	require.Error(t, err, "wrong credentials")
	assert.NotContains(t, err.Error(), "wrong", "the password is not echoed")

	require.NoError(t, repo.LsRemote(ctx, remote.URL, &githttp.BasicAuth{Username: "alice", Password: "s3cret"}))
}

func TestLsRemoteOfAMissingRepositoryFails(t *testing.T) {
	remote := repotest.NewHTTPRemote(t)

	require.Error(t, repo.LsRemote(context.Background(), remote.URL+"-missing", nil))
}

func TestFetchAndPushUseTheSecretsBasicAuth(t *testing.T) {
	remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
	base := remote.PushFiles("main", map[string]string{"a.yaml": "a\n"}, "base")
	auth, err := repo.AuthFromSecret(remote.URL, map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")})
	require.NoError(t, err)
	r := openClone(t, remote.URL, auth)

	tip := fetch(t, r, "main")
	require.Equal(t, base, tip.String())
	c := commit(t, r, tip, files("b.yaml", "b\n"), "with auth")
	push(t, r, "main", c, tip)

	assert.Equal(t, c.String(), remote.Head("main"))
	remote.Fsck()
}

func TestFetchAndPushFailWithWrongCredentials(t *testing.T) {
	remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
	base := remote.PushFiles("main", map[string]string{"a.yaml": "a\n"}, "base")
	good := openClone(t, remote.URL, &githttp.BasicAuth{Username: "alice", Password: "s3cret"})
	tip := fetch(t, good, "main")
	c := commit(t, good, tip, files("b.yaml", "b\n"), "mine")

	anonymous, err := repo.Open(context.Background(), good.Dir(), remote.URL, nil)
	require.NoError(t, err)
	_, err = anonymous.Fetch(context.Background(), "main")
	require.ErrorIs(t, err, transport.ErrAuthenticationRequired)
	assert.ErrorContains(t, err, "check the GitProvider's Secret", "the error says what to fix")

	wrong, err := repo.Open(context.Background(), good.Dir(), remote.URL, &githttp.BasicAuth{Username: "alice", Password: "nope"})
	require.NoError(t, err)
	_, err = wrong.Fetch(context.Background(), "main")
	require.Error(t, err)
	err = wrong.Push(context.Background(), "main", c, tip)
	require.Error(t, err)
	assert.NotErrorIs(t, err, repo.ErrRemoteMoved, "an auth failure is not a lost race")
	assert.ErrorContains(t, err, "the GitProvider's", "the error says what to fix")
	assert.NotContains(t, err.Error(), "nope")
	assert.Equal(t, base, remote.Head("main"))
}

func TestBearerTokenIsSentAsAnAuthorizationHeader(t *testing.T) {
	requireBearer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer t0ken" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	remote := repotest.NewHTTPRemote(t, repotest.WithMiddleware(requireBearer))
	auth, err := repo.AuthFromSecret(remote.URL, map[string][]byte{"bearerToken": []byte("t0ken")})
	require.NoError(t, err)

	require.NoError(t, repo.LsRemote(context.Background(), remote.URL, auth))
	require.Error(t, repo.LsRemote(context.Background(), remote.URL, nil))
}

func TestAuthFromSecretForHTTPFollowsFluxKeys(t *testing.T) {
	const url = "https://git.example.com/org/repo.git"
	cases := []struct {
		name string
		data map[string][]byte
		want transport.AuthMethod
		err  error
	}{
		{"username and password", secret("username", "alice", "password", "pw"), &githttp.BasicAuth{Username: "alice", Password: "pw"}, nil},
		{"bearer token", secret("bearerToken", "tok"), &githttp.TokenAuth{Token: "tok"}, nil},
		{"nothing means anonymous", secret(), nil, nil},
		{"nil data means anonymous", nil, nil, nil},
		{"username without password", secret("username", "alice"), nil, repo.ErrInvalidSecret},
		{"password without username", secret("password", "pw"), nil, repo.ErrInvalidSecret},
		{"token and basic auth together", secret("bearerToken", "tok", "username", "alice", "password", "pw"), nil, repo.ErrInvalidSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := repo.AuthFromSecret(url, c.data)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				assertNoSecretIn(t, err, c.data)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestAuthFromSecretTakesAnHTTPURLsUserInfoWhenTheSecretHasNone(t *testing.T) {
	cases := []struct {
		name string
		url  string
		data map[string][]byte
		want transport.AuthMethod
	}{
		{"a user and a password", "https://bot:PASSW0RD@git.example.com/org/repo.git", nil, &githttp.BasicAuth{Username: "bot", Password: "PASSW0RD"}},
		{"a token as the user name", "https://ghp_T0KEN@git.example.com/org/repo.git", secret(), &githttp.BasicAuth{Username: "ghp_T0KEN"}},
		{"the Secret's credentials win, as in go-git", "https://bot:PASSW0RD@git.example.com/org/repo.git", secret("bearerToken", "tok"), &githttp.TokenAuth{Token: "tok"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := repo.AuthFromSecret(c.url, c.data)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestTheClonesConfigNeverHoldsCredentialsAURLCarries(t *testing.T) {
	remote := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("bot", "PASSW0RD"))
	base := remote.PushFiles("main", map[string]string{"a.yaml": "a\n"}, "base")
	u, err := url.Parse(remote.URL)
	require.NoError(t, err)
	u.User = url.UserPassword("bot", "PASSW0RD")
	dir := filepath.Join(t.TempDir(), "clone")

	// A clone an earlier release configured with the URL as given, credentials included.
	_, err = repo.Open(context.Background(), dir, remote.URL, nil)
	require.NoError(t, err)
	repotest.Git(t, dir, "config", "remote.origin.url", u.String())

	r, err := repo.Open(context.Background(), dir, u.String(), nil)
	require.NoError(t, err)
	tip := fetch(t, r, "main")
	require.Equal(t, base, tip.String(), "the URL's credentials are used")
	c := commit(t, r, tip, files("b.yaml", "b\n"), "with the URL's credentials")
	push(t, r, "main", c, tip)
	assert.Equal(t, c.String(), remote.Head("main"))

	config, err := os.ReadFile(filepath.Join(dir, "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(config), "PASSW0RD")
	assert.Contains(t, string(config), u.Host, "the remote is still configured")
	assert.NotContains(t, r.URL(), "PASSW0RD")
}

func TestAuthFromSecretGivesNoAuthForLocalRepositories(t *testing.T) {
	for _, url := range []string{"file:///srv/git/repo.git", "/srv/git/repo.git"} {
		got, err := repo.AuthFromSecret(url, secret("username", "alice", "password", "pw"))
		require.NoError(t, err)
		assert.Nil(t, got, url)
	}
}

func TestAuthFromSecretForSSHPinsTheHostKey(t *testing.T) {
	hostSigner, _ := repotest.NewSSHKey(t)
	_, identity := repotest.NewSSHKey(t)
	hostLine := knownhosts.Line([]string{"git.example.com"}, hostSigner.PublicKey())

	for _, url := range []string{"git@git.example.com:org/repo.git", "ssh://git@git.example.com/org/repo.git", "ssh://deploy@git.example.com:22/org/repo"} {
		t.Run(url, func(t *testing.T) {
			auth, err := repo.AuthFromSecret(url, map[string][]byte{"identity": identity, "known_hosts": []byte(hostLine + "\n")})
			require.NoError(t, err)
			keys, ok := auth.(*gitssh.PublicKeys)
			require.True(t, ok, "public key auth, got %T", auth)
			assert.Equal(t, strings.SplitN(strings.TrimPrefix(url, "ssh://"), "@", 2)[0], keys.User)
			assert.Equal(t, []string{ssh.KeyAlgoED25519}, keys.HostKeyAlgorithms)

			addr := &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 22}
			assert.NoError(t, keys.HostKeyCallback("git.example.com:22", addr, hostSigner.PublicKey()))
			other, _ := repotest.NewSSHKey(t)
			assert.Error(t, keys.HostKeyCallback("git.example.com:22", addr, other.PublicKey()), "a different host key is refused")
			assert.Error(t, keys.HostKeyCallback("evil.example.com:22", addr, hostSigner.PublicKey()), "an unknown host is refused")
		})
	}
}

func TestAuthFromSecretForSSHFailsClosedWithoutKnownHosts(t *testing.T) {
	_, identity := repotest.NewSSHKey(t)
	for name, kh := range map[string][]byte{"missing": nil, "empty": {}, "blank": []byte(" \n\t\n")} {
		t.Run(name, func(t *testing.T) {
			data := map[string][]byte{"identity": identity}
			if kh != nil {
				data["known_hosts"] = kh
			}
			_, err := repo.AuthFromSecret("git@git.example.com:org/repo.git", data)
			require.ErrorIs(t, err, repo.ErrNoKnownHosts)
		})
	}
}

func TestAuthFromSecretForSSHRejectsKnownHostsWithoutThisHost(t *testing.T) {
	hostSigner, _ := repotest.NewSSHKey(t)
	_, identity := repotest.NewSSHKey(t)
	line := knownhosts.Line([]string{"other.example.com"}, hostSigner.PublicKey())

	_, err := repo.AuthFromSecret("git@git.example.com:org/repo.git", map[string][]byte{"identity": identity, "known_hosts": []byte(line)})

	require.ErrorIs(t, err, repo.ErrNoKnownHosts)
	assert.Contains(t, err.Error(), "git.example.com:22")
}

func TestAuthFromSecretForSSHNeverEchoesTheKeyOrPassphrase(t *testing.T) {
	hostSigner, _ := repotest.NewSSHKey(t)
	kh := []byte(knownhosts.Line([]string{"git.example.com"}, hostSigner.PublicKey()))
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("correct horse"))
	require.NoError(t, err)
	encrypted := pem.EncodeToMemory(block)

	cases := map[string]map[string][]byte{
		"no identity":         {"known_hosts": kh},
		"garbage identity":    {"known_hosts": kh, "identity": []byte("-----BEGIN SECRET-----\nc2VjcmV0LXZhbHVlLTEyMw==\n")},
		"wrong passphrase":    {"known_hosts": kh, "identity": encrypted, "password": []byte("battery staple")},
		"missing passphrase":  {"known_hosts": kh, "identity": encrypted},
		"garbage known_hosts": {"known_hosts": []byte("@@@ not a known hosts line"), "identity": encrypted},
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := repo.AuthFromSecret("ssh://git@git.example.com/org/repo", data)
			require.ErrorIs(t, err, repo.ErrInvalidSecret)
			assertNoSecretIn(t, err, map[string][]byte{"identity": data["identity"], "password": data["password"]})
		})
	}

	auth, err := repo.AuthFromSecret("ssh://git@git.example.com/org/repo", map[string][]byte{"known_hosts": kh, "identity": encrypted, "password": []byte("correct horse")})
	require.NoError(t, err, "the right passphrase opens the key")
	assert.NotNil(t, auth)
}

func TestSSHRemoteWorksEndToEndWithThePinnedHostKey(t *testing.T) {
	remote := repotest.NewSSHRemote(t)
	base := remote.Seed("main", map[string]string{"a.yaml": "a\n"}, "base")
	auth, err := repo.AuthFromSecret(remote.URL, map[string][]byte{"identity": remote.IdentityPEM, "known_hosts": remote.KnownHosts})
	require.NoError(t, err)
	require.NoError(t, repo.LsRemote(context.Background(), remote.URL, auth))
	r := openClone(t, remote.URL, auth)

	tip := fetch(t, r, "main")
	require.Equal(t, base, tip.String())
	c := commit(t, r, tip, files("b.yaml", "b\n"), "over ssh")
	push(t, r, "main", c, tip)

	assert.Equal(t, c.String(), remote.Head("main"))
	remote.Fsck()
}

// goneRemote is the URL of a repository on 127.0.0.1 where nothing listens any more.
func goneRemote(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := "http://" + l.Addr().String() + "/repo.git"
	require.NoError(t, l.Close())
	return gone
}

func TestScrubbingAShortQueryLeavesTheRestOfTheMessageAlone(t *testing.T) {
	err := repo.LsRemote(context.Background(), goneRemote(t)+"?e", nil)

	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused", "only the query itself is taken out")
	assert.NotContains(t, err.Error(), "?e")
}

func TestAnSCPLikeAddressWithAnAtInItsPathStillNeedsSSHCredentials(t *testing.T) {
	_, err := repo.AuthFromSecret("git@github.com:team@x/repo.git", nil)
	require.ErrorIs(t, err, repo.ErrNoKnownHosts, "read as SSH, which never trusts an unknown host")
}

func TestAnSCPLikeAddressIsReadAsGoGitDialsIt(t *testing.T) {
	_, err := repo.AuthFromSecret("git@h:org/repo.git", nil)
	require.ErrorIs(t, err, repo.ErrNoKnownHosts, "a one-letter host is a host go-git dials over SSH, not a drive letter")

	hostSigner, _ := repotest.NewSSHKey(t)
	_, identity := repotest.NewSSHKey(t)
	line := knownhosts.Line([]string{"git.example.com"}, hostSigner.PublicKey()) // port 22 only
	_, err = repo.AuthFromSecret("git@git.example.com:2222:org/repo.git", map[string][]byte{"identity": identity, "known_hosts": []byte(line)})
	require.ErrorIs(t, err, repo.ErrNoKnownHosts)
	assert.Contains(t, err.Error(), "git.example.com:2222", "the port go-git dials, between the colons")
}

func TestAnOpaqueURLIsNeverDialledNorKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "clone")
	for _, u := range []string{"https://bot:PASS^W0RD@127.0.0.1:1/repo.git", "https://SL/ASH@127.0.0.1:1/repo.git"} {
		_, err := repo.Open(context.Background(), dir, u, nil)
		require.ErrorIs(t, err, repo.ErrOpaqueURL)
		assert.NoDirExists(t, dir, "nothing is written, so no config holds the URL")
		err = repo.LsRemote(context.Background(), u, nil)
		require.ErrorIs(t, err, repo.ErrOpaqueURL)
		for _, secret := range []string{"PASS^W0RD", "SL/ASH"} {
			assert.NotContains(t, err.Error(), secret)
		}
	}
}

func TestAnSSHURLsPasswordIsNeitherUsedNorKept(t *testing.T) {
	remote := repotest.NewSSHRemote(t)
	base := remote.Seed("main", map[string]string{"a.yaml": "a\n"}, "base")
	withPassword := strings.Replace(remote.URL, "ssh://git@", "ssh://git:PASSW0RD@", 1)
	auth, err := repo.AuthFromSecret(withPassword, map[string][]byte{"identity": remote.IdentityPEM, "known_hosts": remote.KnownHosts})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "clone")
	r, err := repo.Open(context.Background(), dir, withPassword, auth)
	require.NoError(t, err)
	require.Equal(t, base, fetch(t, r, "main").String(), "the Secret's key is used")

	config, err := os.ReadFile(filepath.Join(dir, "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(config), "PASSW0RD")
	assert.Contains(t, string(config), "ssh://git@", "the account is kept")
}

func TestSSHRemoteRefusesAServerWithAnotherHostKey(t *testing.T) {
	remote := repotest.NewSSHRemote(t)
	impostor, _ := repotest.NewSSHKey(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(remote.URL, "ssh://git@"), "/repo.git")
	wrong := knownhosts.Line([]string{knownhosts.Normalize(addr)}, impostor.PublicKey())
	auth, err := repo.AuthFromSecret(remote.URL, map[string][]byte{"identity": remote.IdentityPEM, "known_hosts": []byte(wrong)})
	require.NoError(t, err)

	err = repo.LsRemote(context.Background(), remote.URL, auth)

	require.Error(t, err)
	assert.Contains(t, err.Error(), "key mismatch")
}

func TestSSHRemoteRefusesAnUnknownClientKey(t *testing.T) {
	remote := repotest.NewSSHRemote(t)
	_, stranger := repotest.NewSSHKey(t)
	auth, err := repo.AuthFromSecret(remote.URL, map[string][]byte{"identity": stranger, "known_hosts": remote.KnownHosts})
	require.NoError(t, err)

	r := openClone(t, remote.URL, auth)
	_, err = r.Fetch(context.Background(), "main")

	require.Error(t, err)
	assert.Equal(t, "", remote.Head("main"))
}

// secret builds Secret data from key, value pairs.
func secret(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}

// assertNoSecretIn checks that no secret value leaks into an error message.
func assertNoSecretIn(t *testing.T, err error, data map[string][]byte) {
	t.Helper()
	for k, v := range data {
		if len(v) < 3 || k == "username" {
			continue
		}
		assert.NotContains(t, err.Error(), string(v), "error leaks %s", k)
		for _, line := range strings.Split(string(v), "\n") {
			if len(line) > 8 && !strings.HasPrefix(line, "-----") {
				assert.NotContains(t, err.Error(), line, "error leaks part of %s", k)
			}
		}
	}
}

func TestErrorsNeverRepeatCredentialsCarriedInTheURL(t *testing.T) {
	// A failing proxy: go-git quotes the URL it requested, user info included, in the error
	// of an unexpected status.
	failing := repotest.NewHTTPRemote(t, repotest.WithMiddleware(func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) })
	}))
	// A remote that is gone: Go's HTTP client quotes the URL, query included, in a dial error.
	gone := goneRemote(t)
	carriers := map[string]func(string) string{
		"a token as the user name":        func(u string) string { return strings.Replace(u, "://", "://ghp_T0KEN@", 1) },
		"a user and a password":           func(u string) string { return strings.Replace(u, "://", "://bot:PASSW0RD@", 1) },
		"a token in the query":            func(u string) string { return u + "?private_token=QU3RY" },
		"a query that is the token alone": func(u string) string { return u + "?QU3RY" },
		"an escaped token, and more": func(u string) string {
			return u + "?a=1&private_token=QU3RY%2BT0KEN"
		},
		"a password the URL does not escape": func(u string) string { return strings.Replace(u, "://", "://bot:PASS^W0RD@", 1) },
		"a token holding a slash":            func(u string) string { return strings.Replace(u, "://", "://SL/ASH@", 1) },
		"a token in the fragment":            func(u string) string { return u + "#FR%41G" },
	}
	for remoteName, remote := range map[string]string{"failing": failing.URL, "gone": gone} {
		host := strings.TrimPrefix(remote, "http://")[:strings.Index(strings.TrimPrefix(remote, "http://"), "/")]
		for name, carry := range carriers {
			t.Run(remoteName+"/"+name, func(t *testing.T) {
				err := repo.LsRemote(context.Background(), carry(remote), nil)
				require.Error(t, err)
				for _, secret := range []string{"T0KEN", "PASSW0RD", "PASS^W0RD", "QU3RY", "SL/ASH", "FR%41G", "#FRAG"} {
					assert.NotContains(t, err.Error(), secret)
				}
				assert.Contains(t, err.Error(), host, "the message still names the repository")
			})
		}
	}
}

// The error reaches the GitProvider's status, and a status whose message changed requeues
// it at once: the parser's temporary file, new at every call, must not be in it.
func TestAuthFromSecretRefusesAMalformedKnownHostsWithTheSameErrorEachTime(t *testing.T) {
	_, identity := repotest.NewSSHKey(t)
	data := map[string][]byte{"identity": identity, "known_hosts": []byte("git.example.com ssh-ed25519 !!\n")}
	_, first := repo.AuthFromSecret("ssh://git@git.example.com/org/repo", data)
	require.ErrorIs(t, first, repo.ErrInvalidSecret)
	_, second := repo.AuthFromSecret("ssh://git@git.example.com/org/repo", data)
	assert.Equal(t, first.Error(), second.Error())
	assert.Contains(t, first.Error(), "known_hosts:1:", "the line it could not read")
	assert.NotContains(t, first.Error(), os.TempDir())
}
