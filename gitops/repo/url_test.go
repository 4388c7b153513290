package repo_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

func TestNormalizeURLGivesOneFormPerRepository(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://github.com/org/repo", "https://github.com/org/repo"},
		{"https://github.com/org/repo.git", "https://github.com/org/repo"},
		{"https://github.com/org/repo/", "https://github.com/org/repo"},
		{"https://github.com/org/repo.git/", "https://github.com/org/repo"},
		{"HTTPS://GitHub.COM/Org/Repo", "https://github.com/org/repo"},
		{"git@GitLab.com:Team/Project.git", "ssh://git@gitlab.com/team/project"},
		{"https://git.example.com/Org/Repo", "https://git.example.com/Org/Repo"},
		{"https://github.com:443/org/repo", "https://github.com/org/repo"},
		{"https://git.example.com:8443/org/repo", "https://git.example.com:8443/org/repo"},
		{"http://git.example.com:80/repo", "http://git.example.com/repo"},
		{"https://user:token@github.com/org/repo.git", "https://github.com/org/repo"},
		{"https://token@github.com/org/repo", "https://github.com/org/repo"},
		{"https://github.com//org//repo", "https://github.com/org/repo"},
		{"https://github.com/org/repo?ref=main#frag", "https://github.com/org/repo"},
		{"  https://github.com/org/repo  ", "https://github.com/org/repo"},
		{"git@github.com:org/repo.git", "ssh://git@github.com/org/repo"},
		{"git@GitHub.com:/org/repo", "ssh://git@github.com/org/repo"},
		{"github.com:org/repo", "ssh://git@github.com/org/repo"},
		{"git@h:org/repo", "ssh://git@h/org/repo"},                                       // a one-letter host, which go-git dials as one
		{"git@git.example.com:2222:org/repo", "ssh://git@git.example.com:2222/org/repo"}, // go-git dials the port between the colons
		{"git@git.example.com:022:org/repo", "ssh://git@git.example.com/org/repo"},       // port 22, written with a leading zero
		{"git@git.example.com:22:org/repo", "ssh://git@git.example.com/org/repo"},        // the default port, as for ssh://
		{"ssh://github.com/org/repo", "ssh://git@github.com/org/repo"},
		{"ssh://deploy@git.example.com/srv/repo", "ssh://deploy@git.example.com/srv/repo"},
		{"ssh://git@github.com/org/repo.git", "ssh://git@github.com/org/repo"},
		{"ssh://git@github.com:22/org/repo", "ssh://git@github.com/org/repo"},
		{"ssh://git:secret@github.com/org/repo", "ssh://git@github.com/org/repo"},
		{"ssh://git@git.example.com:2222/org/repo", "ssh://git@git.example.com:2222/org/repo"},
		{"git+ssh://git@github.com/org/repo", "ssh://git@github.com/org/repo"},
		{"ssh://git@[::1]:2222/repo", "ssh://git@[::1]:2222/repo"},
		{"file:///srv/git/repo.git", "file:///srv/git/repo.git"},
		{"/srv/git/repo.git/", "file:///srv/git/repo.git"},
		{"file:///srv/git/repo/", "file:///srv/git/repo"},
		{"git://git.example.com:9418/repo.git", "git://git.example.com/repo"},
		{"", ""},
		{"not a url", "not a url"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			assert.Equal(t, c.want, repo.NormalizeURL(c.in))
		})
	}
}

func TestNormalizeURLGivesAnOpaqueURLAKeyOfItsOwn(t *testing.T) {
	unparsed := repo.NormalizeURL("https://bot:PASS^W0RD@github.com/org/repo")
	slashed := repo.NormalizeURL("https://ghp_T0/KEN@github.com/org/repo")
	for _, key := range []string{unparsed, slashed} {
		assert.True(t, strings.HasPrefix(key, "opaque-url:"), key)
		assert.NotContains(t, key, "W0RD")
		assert.NotContains(t, key, "KEN")
	}
	assert.NotEqual(t, unparsed, slashed)
	assert.NotEqual(t, repo.NormalizeURL("https://github.com/org/repo"), unparsed, "an opaque URL shares no worker or clone with a working one")
	assert.Equal(t, "ssh://git@github.com/team@x/repo", repo.NormalizeURL("git@github.com:team@x/repo.git"), "an scp-like address is not opaque")
	scp := repo.NormalizeURL("bot:S3CRET@github.com:org/repo.git")
	assert.True(t, strings.HasPrefix(scp, "opaque-url:"), "unless a password was written into it: %s", scp)
	for _, escaped := range []string{"https://github.com/org%40x/repo.git", "https://github.com/a|b%40c/repo.git"} {
		assert.NotContains(t, repo.NormalizeURL(escaped), "opaque-url:", "an escaped @ in the path is no user info: %s", escaped)
	}
}

func TestRepositoryKeyNamesTheRepositoryWhicheverAccountDialsIt(t *testing.T) {
	cases := []struct{ name, a, b string }{
		{"shares a CodeCommit repository between two SSH key IDs",
			"ssh://APKAEXAMPLE1@git-codecommit.eu-west-1.amazonaws.com/v1/repos/live",
			"ssh://APKAEXAMPLE2@git-codecommit.eu-west-1.amazonaws.com/v1/repos/live"},
		{"shares an scp-like address and an ssh URL without a user",
			"deploy@git.example.com:org/repo.git", "ssh://git.example.com/org/repo"},
		{"shares an https repository between two tokens",
			"https://a:t1@github.com/org/repo", "https://b:t2@github.com/org/repo.git"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, repo.RepositoryKey(c.a), repo.RepositoryKey(c.b))
			assert.NotContains(t, repo.RepositoryKey(c.a), "@")
		})
	}
	assert.NotEqual(t, repo.RepositoryKey("ssh://alice@host/~/repo"), repo.RepositoryKey("ssh://bob@host/~/repo"),
		"a path in the user's home is another repository per user")
	assert.Equal(t, "ssh://alice@host/~/repo", repo.RepositoryKey("alice@host:~/repo"))
	assert.NotEqual(t, repo.NormalizeURL("ssh://a@h/r"), repo.NormalizeURL("ssh://b@h/r"), "the address still says which account dials")
}

func TestNormalizeURLIsIdempotent(t *testing.T) {
	for _, in := range []string{"git@github.com:org/repo.git", "HTTPS://u:p@Host:443/a/b.git/", "/srv/x.git"} {
		once := repo.NormalizeURL(in)
		assert.Equal(t, once, repo.NormalizeURL(once), in)
	}
}

func TestHasCredentialsFindsEverySecretARepositoryURLMayCarry(t *testing.T) {
	cases := []struct {
		name, in string
		want     bool
	}{
		{"a password", "https://bot:S3CRET@github.com/org/repo.git", true},
		{"a token used as the user name", "https://ghp_TOKEN@github.com/org/repo", true},
		{"a token in the query", "https://git.example.com/repo.git?private_token=S3CRET", true},
		{"a password of an ssh URL", "ssh://git:S3CRET@github.com/org/repo.git", true},
		{"a URL whose parts cannot be told apart", "https://ghp_T0/KEN@github.com/org/repo", true},
		{"not an ssh user name, which selects an account", "ssh://git@github.com/org/repo.git", false},
		{"not an scp-like address", "git@github.com:org/repo.git", false},
		{"a password written into an scp-like address", "bot:S3CRET@github.com:org/repo.git", true},
		{"not an scp-like address without a user, with an @ in its path", "github.com:team@x/repo.git", false},
		{"not a relative path holding a colon and an @", "repos/a:b@c", false},
		{"not a URL without user info", "https://github.com/org/repo.git", false},
		{"not a local path holding an @", "file:///srv/git/team@x/repo.git", false},
		{"not a local path", "/srv/git/repo.git", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, repo.HasCredentials(c.in))
		})
	}
}

func TestRedactLeavesNoCredentialsInARepositoryURL(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"drops a password", "https://bot:S3CRET@github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"drops a token used as the user name", "https://ghp_TOKEN@github.com/org/repo", "https://github.com/org/repo"},
		{"drops a token in the query", "https://git.example.com/repo.git?private_token=S3CRET", "https://git.example.com/repo.git"},
		{"drops the ssh user of a URL", "ssh://git@github.com/org/repo.git", "ssh://github.com/org/repo.git"},
		{"keeps a URL without credentials as written", "https://GitHub.com/org/repo.git/", "https://GitHub.com/org/repo.git/"},
		{"keeps an scp-like address, which holds no password", "git@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"drops a password written into an scp-like address", "bot:S3CRET@github.com:org/repo.git", "github.com:org/repo.git"},
		{"keeps a local path", "/srv/git/repo.git", "/srv/git/repo.git"},
		{"drops all that may be user info of a URL that does not parse", "https://bot:pa^ss/w@rd@github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"drops the query of a URL that does not parse", "https://bot:p^w@github.com/org/repo?private_token=S3CRET", "https://github.com/org/repo"},
		{"drops a token holding a slash, which parses as a path", "https://ghp_T0/KEN@github.com/org/repo", "https://github.com/org/repo"},
		{"keeps a local path holding an @", "file:///srv/git/team@x/repo.git", "file:///srv/git/team@x/repo.git"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, repo.Redact(c.in))
		})
	}
}
