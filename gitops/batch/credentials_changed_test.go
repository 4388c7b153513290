package batch

import (
	"testing"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

func TestCredentialsChanged(t *testing.T) {
	host, _ := repotest.NewSSHKey(t)
	_, identity := repotest.NewSSHKey(t)
	secret := map[string][]byte{repo.KeyIdentity: identity,
		repo.KeyKnownHosts: []byte(knownhosts.Line([]string{"git.example.com"}, host.PublicKey()) + "\n")}
	sshAuth := func() TargetSpec {
		auth, err := repo.AuthFromSecret("git@git.example.com:org/repo.git", secret)
		require.NoError(t, err)
		return TargetSpec{Auth: auth, AuthVersion: "provider generation 1, Secret 42 resourceVersion 7"}
	}
	rotated := sshAuth()
	rotated.AuthVersion = "provider generation 1, Secret 42 resourceVersion 8"
	token := func(password, version string) TargetSpec {
		return TargetSpec{Auth: &githttp.BasicAuth{Username: "alice", Password: password}, AuthVersion: version}
	}
	unversioned := sshAuth()
	unversioned.AuthVersion = ""

	for _, tc := range []struct {
		name          string
		before, after TargetSpec
		want          bool
	}{
		{"keeps the backoff when the controller builds the same SSH credentials again", sshAuth(), sshAuth(), false},
		{"retries at once when the SSH credentials' Secret changed", sshAuth(), rotated, true},
		{"keeps the backoff for the same token", token("s3cret", "v1"), token("s3cret", "v1"), false},
		{"retries at once for a new token", token("read-only", "v1"), token("s3cret", "v2"), true},
		{"compares credentials given without a version by value", token("read-only", ""), token("s3cret", ""), true},
		{"finds the same token given without a version unchanged", token("s3cret", ""), token("s3cret", ""), false},
		{"cannot see into SSH credentials given without a version, so takes them as new", unversioned, sshAuth(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, credentialsChanged(tc.before, tc.after))
		})
	}
}
