package batch

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
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

func TestAnObjectKeepsOnlyTheCreditsACommitCanName(t *testing.T) {
	var names []string
	for i := 100; i > 0; i-- { // a hundred people change one object in turn while Git is away
		names = credited(names, fmt.Sprintf("user-%03d", i))
	}
	names = credited(names, "user-005")
	names = credited(names, "")
	require.Len(t, names, keptCoAuthors, "bounded, whoever comes")
	assert.Equal(t, "user-001", names[0], "the first names, sorted, as a commit credits them")
	assert.Equal(t, "user-021", names[keptCoAuthors-1])

	win := &authorWindow{author: "user-003", coAuthors: map[ObjectKey][]string{qkey("a"): names}}
	got := coAuthorsOf(win, []action{{verb: "Update", id: qkey("a").Identity()}})
	assert.Len(t, got, maxCoAuthors, "its author is among the kept names; the commit still names twenty")
	assert.NotContains(t, got, "user-003")

	merged := Change{CoAuthors: names}.merge(Change{Author: "user-001", CoAuthors: []string{"user-000"}})
	assert.Equal(t, "user-000", merged.CoAuthors[0], "a change's credits are kept alike when changes merge")
	assert.NotContains(t, merged.CoAuthors, "user-001", "never its own author")
	assert.LessOrEqual(t, len(merged.CoAuthors), keptCoAuthors)
}

func TestCoAuthors(t *testing.T) {
	b, c := qkey("b"), qkey("c")
	win := &authorWindow{author: "bob", coAuthors: map[ObjectKey][]string{b: {"alice", "bob"}, c: {"carol"}}}
	written := []action{{verb: "Update", id: b.Identity(), path: "live/team-a/configmaps/b.yaml"}}
	assert.Equal(t, []string{"alice"}, coAuthorsOf(win, written),
		"credits who changed an object the commit writes, never the commit's author, nor someone whose object it does not write")

	many := &authorWindow{author: "op", coAuthors: map[ObjectKey][]string{}}
	var all []action
	for i := range maxCoAuthors + 5 {
		k := qkey(fmt.Sprintf("o%02d", i))
		many.coAuthors[k] = []string{fmt.Sprintf("user-%02d", i)}
		all = append(all, action{verb: "Update", id: k.Identity()})
	}
	got := coAuthorsOf(many, all)
	assert.Len(t, got, maxCoAuthors, "bounded")
	assert.Equal(t, "user-00", got[0], "sorted")

	committer := Identity{Name: "GitOps Reverser", Email: "reverser@example.com"}
	when := time.Unix(0, 0)
	assert.Equal(t, "Update ConfigMap team-a/b\n", withCoAuthors("Update ConfigMap team-a/b\n", nil, committer, "", when))
	assert.Equal(t, "Update ConfigMap team-a/b\n\nCo-authored-by: alice <alice@cluster.local>\n"+
		"Co-authored-by: system:serviceaccount:ci:deployer <system-serviceaccount-ci-deployer@cluster.local>\n",
		withCoAuthors("Update ConfigMap team-a/b\n\n", []string{"alice", "system:serviceaccount:ci:deployer"}, committer, "", when),
		"trailers after one blank line, as Git and GitHub read them")
}

func TestCoAuthorsJoinAMessagesOwnTrailers(t *testing.T) {
	committer := Identity{Name: "GitOps Reverser", Email: "reverser@example.com"}
	when := time.Unix(0, 0)
	signed := "Rotate the keys\n\nSigned-off-by: Bob <bob@example.com>"
	assert.Equal(t, signed+"\nCo-authored-by: alice <alice@cluster.local>\n", withCoAuthors(signed, []string{"alice"}, committer, "", when),
		"in the block git reads as trailers, not a paragraph of their own after it")
	tests := []struct {
		msg  string
		want bool
	}{
		{"Rotate the keys\n\nSigned-off-by: Bob <bob@example.com>\nReviewed-by: Carol", true},
		{"Rotate the keys", false},
		{"Signed-off-by: Bob <bob@example.com>", false},
		{"Rotate the keys\n\nThe old ones leaked: rotate them all.", false},
		{"Rotate the keys\n\nSee also: the runbook\nfor details", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, endsWithTrailers(tt.msg), tt.msg)
	}
	assert.Contains(t, withoutCoAuthors(signed+"\nCo-authored-by: alice <alice@cluster.local>\n"), signed, "what a request's message is looked for in")
	credited := "Fix\n\nCo-authored-by: Dan <Dan@example.com>"
	joined := withCoAuthors(credited, []string{"alice", "Dan"}, committer, "example.com", when)
	assert.Equal(t, credited+"\nCo-authored-by: alice <alice@example.com>\n", joined, "Dan is credited once")
	assert.Equal(t, credited, withCoAuthors(credited, []string{"Dan"}, committer, "example.com", when), "nobody new: the message as it was")
	assert.Contains(t, withoutCoAuthors(joined), credited, "a request's own Co-authored-by lines are still found")
}

func TestOccurrences(t *testing.T) {
	tests := []struct {
		name, commit, message string
		want                  int
	}{
		{"finds a message that is the whole commit message", "release 1.2\n", "release 1.2", 1},
		{"counts a message once for each request of the window it was joined for", "release 1.2\n\nrelease 1.2\n", "release 1.2", 2},
		{"counts it among other requests' messages", "notes\n\nrelease 1.2\n\nmore notes\n\nrelease 1.2\n", "release 1.2", 2},
		{"finds none in a commit without it", "Update ConfigMap ops/app\n", "release 1.2", 0},
		{"takes no line of a paragraph for the message", "release 1.2 and more\n", "release 1.2", 0},
		{"finds a message of two paragraphs twice", "release\n\nnotes\n\nrelease\n\nnotes\n", "release\n\nnotes", 2},
		{"reads past the co-authors credited after the last one", "release 1.2\n\nrelease 1.2\nCo-authored-by: bob <bob@cluster.local>\n", "release 1.2", 2},
		{"compares the message without its surrounding blanks", "release 1.2\n", "\n release 1.2\n\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, occurrences(tt.commit, tt.message))
		})
	}
}

func TestClaimsOn(t *testing.T) {
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ops", Name: name} }
	claimed := map[types.NamespacedName]Claim{
		key("release"):       {SHA: "x", Message: "release 1.2"},
		key("release-notes"): {SHA: "x", Message: "release 1.2\n\nnotes"},
		key("notes"):         {SHA: "x", Message: "notes"},
		key("earlier"):       {SHA: "y", Message: "release 1.2"},
		key("in-doubt"):      {Message: "release 1.2", Attempted: []string{"u", "v"}},
	}
	tests := []struct {
		name, sha, message string
		want               int
	}{
		{"counts each request of the commit whose message is the message, or holds it as a paragraph", "x", "release 1.2", 2},
		{"counts the requests of that commit only", "y", "release 1.2", 1},
		{"counts a longer message only where it is whole", "x", "release 1.2\n\nnotes", 1},
		{"counts nothing for a commit nobody reports", "z", "release 1.2", 0},
		{"counts a waiting request whose push of the commit reported an error", "v", "release 1.2", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, claimsOn(claimed, tt.sha, tt.message))
		})
	}
}

func TestOwnCommit(t *testing.T) {
	at := func(sec int) time.Time { return time.Unix(int64(1_000_000+sec), 0) }
	c1, c2, c3 := plumbing.NewHash("1111"), plumbing.NewHash("2222"), plumbing.NewHash("3333")
	walk := []carrier{{c3, at(30), "release"}, {c2, at(20), "release"}, {c1, at(10), "release"}} // from the tip
	waiting := func(sec int, message string) []Claim { return []Claim{{Message: message, Created: at(sec)}} }
	tests := []struct {
		name    string
		found   []carrier
		created time.Time
		waiting []Claim
		want    plumbing.Hash
	}{
		{"takes the first commit made since the request", walk, at(15), nil, c2},
		{"takes a commit made in the request's second", walk, at(20).Add(500 * time.Millisecond), nil, c2},
		{"of commits of one second, takes the one farther from the tip", []carrier{{c2, at(20), "release"}, {c1, at(20), "release"}}, at(5), nil, c1},
		{"takes the latest made before the request when none came since (the API server's clock ahead)", walk, at(40), nil, c3},
		{"leaves one made before to a waiting request created before that commit", walk, at(40), waiting(25, "release"), c2},
		{"leaves every one made before to a waiting request created before them", walk, at(40), waiting(5, "release"), plumbing.ZeroHash},
		{"takes one made before that does not carry a waiting request's whole message", walk, at(40), waiting(5, "release\n\nnotes"), c3},
		{"does not let a waiting request stand in the way of one made since", walk, at(25), waiting(5, "release"), c3},
		{"finds nothing in no commits", nil, at(5), nil, plumbing.ZeroHash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ownCommit(tt.found, tt.created, tt.waiting)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, !tt.want.IsZero(), ok)
		})
	}
}
