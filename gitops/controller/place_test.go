package controller

import (
	"testing"
	"time"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestOverlaps(t *testing.T) {
	p := func(url, branch, folder string) Place { return Place{URL: url, Branch: branch, Folder: folder} }
	cases := []struct {
		name string
		a, b Place
		want bool
	}{
		{"refuses equal folders on one repository and branch", p("r", "main", "live"), p("r", "main", "live"), true},
		{"refuses a folder nested in another", p("r", "main", "live"), p("r", "main", "live/team"), true},
		{"refuses a folder around another", p("r", "main", "live/team"), p("r", "main", "live"), true},
		{"allows sibling folders that share a prefix", p("r", "main", "live"), p("r", "main", "live2"), false},
		{"allows the same folder on another branch", p("r", "main", "live"), p("r", "dev", "live"), false},
		{"allows the same folder in another repository", p("r", "main", "live"), p("s", "main", "live"), false},
		{"refuses a folder of a target whose provider is gone, in the repository it last resolved",
			p("r", "main", "live"), Place{URL: "gitprovider:a/gone", LastURL: "r", Branch: "main", Folder: "live/team"}, true},
		{"refuses two targets of one missing provider, whatever they last resolved",
			Place{URL: "gitprovider:a/gone", Branch: "main", Folder: "live"}, Place{URL: "gitprovider:a/gone", LastURL: "r", Branch: "main", Folder: "live"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Overlaps(tc.a, tc.b))
		})
	}
}

func TestFolderHolder(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := func(name, folder string, age int) Place {
		return Place{Key: types.NamespacedName{Namespace: "a", Name: name}, URL: "r", Branch: "main", Folder: folder,
			Created: t0.Add(-time.Duration(age) * time.Minute)}
	}
	gone := func(pl Place, last string) Place {
		pl.URL, pl.LastURL = "gitprovider:a/missing", last
		return pl
	}
	ssh := func(pl Place, url string) Place {
		pl.URL = url
		return pl
	}
	cases := []struct {
		name   string
		me     Place
		all    []Place
		holder string // "" when me holds its folder
	}{
		{"keeps the folder with no other target", p("me", "live", 1), []Place{p("me", "live", 1)}, ""},
		{"gives way to an older target whose folder holds it", p("me", "live/team", 1), []Place{p("old", "live", 2), p("me", "live/team", 1)}, "old"},
		{"gives way to an older target inside its folder", p("me", "live", 1), []Place{p("old", "live/team", 2)}, "old"},
		{"keeps the folder against a newer target", p("me", "live", 2), []Place{p("new", "live", 1)}, ""},
		{"breaks a tie of creation times by name", p("b", "live", 1), []Place{p("a", "live", 1)}, "a"},
		{"wins a tie of creation times by name", p("a", "live", 1), []Place{p("b", "live", 1)}, ""},
		{"ignores targets on sibling folders", p("me", "live", 1), []Place{p("old", "live2", 2)}, ""},
		{"ignores a target that is itself shut out by an older one",
			p("me", "live/b", 1), []Place{p("oldest", "live/a", 3), p("middle", "live", 2)}, ""},
		{"names the oldest of several holders", p("me", "live", 1), []Place{p("x", "live/x", 2), p("y", "live/y", 3)}, "y"},
		{"gives way to an older target whose provider is gone, in the repository it last wrote to",
			p("me", "live/team", 1), []Place{gone(p("old", "live", 2), "r")}, "old"},
		{"keeps the folder against an older target whose provider is gone, that last wrote elsewhere",
			p("me", "live/team", 1), []Place{gone(p("old", "live", 2), "s")}, ""},
		{"gives way by an ssh repository whose user its redacted status lost",
			ssh(p("me", "live/team", 1), "ssh://gitea@git.example.com/org/repo"),
			[]Place{gone(p("old", "live", 2), "ssh://git@git.example.com/org/repo")}, "old"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := FolderHolder(tc.me, tc.all)
			assert.Equal(t, tc.holder != "", ok)
			assert.Equal(t, tc.holder, h.Key.Name)
		})
	}
}

func TestApplyWriterStatus(t *testing.T) {
	old := &v1alpha1.CommitInfo{SHA: "1111111111111111111111111111111111111111"}
	t.Run("forgets the last commit of a repository the target left for a branch with none", func(t *testing.T) {
		gt := &v1alpha1.GitTarget{Status: v1alpha1.GitTargetStatus{LastCommit: old}}
		applyWriterStatus(gt, batch.TargetStatus{Known: true, BranchEmpty: true})
		assert.Nil(t, gt.Status.LastCommit)
	})
	t.Run("keeps the last commit when the writer could not read the branch's", func(t *testing.T) {
		gt := &v1alpha1.GitTarget{Status: v1alpha1.GitTargetStatus{LastCommit: old}}
		applyWriterStatus(gt, batch.TargetStatus{Known: true})
		assert.Equal(t, old, gt.Status.LastCommit)
	})
	t.Run("keeps the status while the writer has not read the branch", func(t *testing.T) {
		gt := &v1alpha1.GitTarget{Status: v1alpha1.GitTargetStatus{LastCommit: old}}
		applyWriterStatus(gt, batch.TargetStatus{})
		assert.Equal(t, old, gt.Status.LastCommit)
	})
}
