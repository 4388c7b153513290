package batch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAuthorSignature(t *testing.T) {
	committer := Identity{Name: "GitOps Reverser", Email: "reverser@example.com"}
	when := time.Unix(0, 0)
	tests := []struct {
		name, username, domain, wantName, wantEmail string
	}{
		{"falls back to the committer when nobody was joined", "", "", "GitOps Reverser", "reverser@example.com"},
		{"keeps a username that is an address", "alice@example.com", "", "alice@example.com", "alice@example.com"},
		{"completes a plain username under the default domain", "kubernetes-admin", "", "kubernetes-admin", "kubernetes-admin@cluster.local"},
		{"turns a service account into a valid local part", "system:serviceaccount:ci:deployer", "", "system:serviceaccount:ci:deployer", "system-serviceaccount-ci-deployer@cluster.local"},
		{"uses the configured domain", "alice", "corp.example", "alice", "alice@corp.example"},
		{"treats an OIDC issuer-prefixed name as a name, not an address", "https://issuer.example#alice@example.com", "", "https://issuer.example#alice@example.com", "https---issuer.example-alice-example.com@cluster.local"},
		{"drops characters Git forbids in a name", "eve<evil>\nx", "", "eveevilx", "eveevilx@cluster.local"},
		{"falls back to the committer when only blanks are left once those characters go", "< >", "", "GitOps Reverser", "reverser@example.com"},
		{"trims the blanks those characters leave around a name", "<alice> ", "", "alice", "alice@cluster.local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := authorSignature(tt.username, committer, tt.domain, when)
			assert.Equal(t, tt.wantName, got.Name)
			assert.Equal(t, tt.wantEmail, got.Email)
		})
	}
}
