package batch

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMessages(t *testing.T) {
	app := MessageChange{Verb: "Update", Kind: "ConfigMap", Namespace: "team-a", Name: "app", Object: "ConfigMap team-a/app", Path: "live/team-a/configmaps/app.yaml"}
	api := MessageChange{Verb: "Create", Group: "apps", Kind: "Deployment", Namespace: "team-a", Name: "api", Object: "apps/Deployment team-a/api"}
	cases := []struct {
		name          string
		single, group string
		changes       []MessageChange
		want          string
	}{
		{"says what happened to a single object by default", "", "", []MessageChange{app}, "Update ConfigMap team-a/app"},
		{"counts a group and lists it by default", "", "", []MessageChange{app, api},
			"team-a/live: 2 changes by alice\n\n- Update ConfigMap team-a/app\n- Create apps/Deployment team-a/api\n"},
		{"renders a custom single template", "chore({{.Namespace}}): {{.Verb}} {{.Kind}} {{.Name}} in {{.Path}}", "", []MessageChange{app},
			"chore(team-a): Update ConfigMap app in live/team-a/configmaps/app.yaml"},
		{"renders a custom group template", "", "sync {{.Target}} ({{len .Changes}})", []MessageChange{app, api}, "sync team-a/live (2)"},
		{"falls back to the default when a template renders nothing", "{{if false}}x{{end}}", "", []MessageChange{app}, "Update ConfigMap team-a/app"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMessages(tc.single, tc.group)
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.Render("team-a/live", "alice", tc.changes))
		})
	}
}

func TestParseMessagesRefusesBadTemplates(t *testing.T) {
	_, err := ParseMessages("{{.Verb", "")
	assert.ErrorIs(t, err, ErrInvalidTemplate)
	assert.ErrorContains(t, err, "single")
	_, err = ParseMessages("", "{{.NoSuchField}}")
	assert.ErrorIs(t, err, ErrInvalidTemplate, "a template naming an unknown variable is refused before any commit")
	assert.ErrorContains(t, err, ".Verb, .Object", "the refusal lists the variables there are")
}

func TestParseMessagesRefusesTemplatesWhoseWorkHasNoBound(t *testing.T) {
	cases := []struct{ name, single, group, says string }{
		{"refuses a range inside a range, whose work multiplies by a window's changes at each level", "",
			"{{range .Changes}}{{range $.Changes}}x{{end}}{{end}}", "inside a {{range}}"},
		{"refuses a range over a number", "{{range 1000000000}}{{end}}", "", "over .Changes only"},
		{"refuses a range over a number in a variable", "{{$n := 999999999999999}}{{range $n}}{{end}}", "", "over .Changes only"},
		{"refuses a range over a number brought in by with", "{{with 999999999999999}}{{range .}}{{end}}{{end}}", "", "over .Changes only"},
		{"refuses a range inside a with inside a range", "", "{{range .Changes}}{{with .}}{{range $.Changes}}{{end}}{{end}}{{end}}", "inside a {{range}}"},
		{"refuses a printf that would build hundreds of megabytes in one call, before it runs",
			`{{printf "` + strings.Repeat("%01000000d", 100) + `"` + strings.Repeat(" 0", 100) + `}}`, "", "a call would build more than"},
		{"refuses a template that builds text without bound, though it writes none",
			`{{$x := "xxxxxxxx"}}` + strings.Repeat("{{$x = print $x $x}}", 30), "", "would build more than"},
		{"refuses a printf argument index, which prints one argument any number of times", `{{printf "%[1]s%[1]s" .Object}}`, "", "would build more than"},
		{"refuses a template that builds more than its budget in calls each within bounds",
			`{{$y := ""}}` + strings.Repeat(`{{$y = printf "%060000d" 0}}`, 80), "", "the template builds more than"},
		{"refuses {{template}}, a fan-out without a range", `{{define "x"}}a{{end}}{{template "x"}}`, "", "not supported"},
		{"refuses a single template that reads a second change, which a single change has not", "{{index .Changes 1}}", "", "index out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMessages(tc.single, tc.group)
			assert.ErrorIs(t, err, ErrInvalidTemplate)
			assert.ErrorContains(t, err, tc.says)
		})
	}
	t.Run("accepts the ranges people write over the changes", func(t *testing.T) {
		for _, group := range []string{
			DefaultGroupMessage,
			"{{range $i, $c := .Changes}}{{if $i}}, {{end}}{{$c.Object}}{{end}}",
			"{{range $.Changes}}{{with .Path}}{{.}}{{end}}{{else}}none{{end}}",
		} {
			_, err := ParseMessages("", group)
			assert.NoError(t, err, group)
		}
		for _, single := range []string{`{{printf "%s/%s" .Namespace .Name}}`, `{{printf "%-40s %s" .Object .Path | html}}`} {
			_, err := ParseMessages(single, "")
			assert.NoError(t, err, single)
		}
	})
	t.Run("takes the default message when a template would write more than a megabyte", func(t *testing.T) {
		m, err := ParseMessages("", `{{range .Changes}}{{printf "%060000d" 0}}{{end}}`)
		require.NoError(t, err, "two changes' worth fits")
		changes := make([]MessageChange, 20)
		for i := range changes {
			changes[i] = MessageChange{Verb: "Update", Object: "ConfigMap team-a/app"}
		}
		assert.True(t, strings.HasPrefix(m.Render("team-a/live", "alice", changes), "team-a/live: 20 changes by alice"))
	})
}

func TestATemplateThatFailsAtCommitTimeSaysWhyTheDefaultWasUsed(t *testing.T) {
	m, err := ParseMessages("", "{{if gt (len .Changes) 2}}{{index .Changes 9}}{{end}}{{.Target}}")
	require.NoError(t, err, "two sample changes pass")
	app := MessageChange{Verb: "Update", Object: "ConfigMap team-a/app"}
	out, fellBack := m.RenderOrDefault("team-a/live", "alice", []MessageChange{app, app, app})
	assert.True(t, strings.HasPrefix(out, "team-a/live: 3 changes by alice"), out)
	assert.ErrorContains(t, fellBack, "index")
	_, fellBack = m.RenderOrDefault("team-a/live", "alice", []MessageChange{app, app})
	assert.NoError(t, fellBack)
}

func TestCheckMessageFields(t *testing.T) {
	cases := []struct {
		name, single, group, says string
	}{
		{name: "accepts the defaults"},
		{name: "accepts every variable where it has a value",
			single: "{{.Verb}} {{.Group}} {{.Kind}} {{.Namespace}} {{.Name}} {{.Object}} {{.Path}} {{.Target}} {{.Author}} {{len .Changes}}",
			group:  "{{.Target}} {{.Author}} {{range .Changes}}{{.Verb}} {{.Object}} {{.Path}}{{end}}{{with index .Changes 0}}{{.Kind}}{{end}}"},
		{name: "accepts a change's field through a variable of the range",
			group: "{{range $c := .Changes}}{{$c.Object}}{{end}}"},
		{name: "refuses a typo in a branch the sample rendering never runs",
			single: `{{if eq .Verb "Delete"}}Remove {{.Obj}}{{else}}{{.Verb}} {{.Object}}{{end}}`, says: ".Obj is not a variable"},
		{name: "refuses a typo in the else branch of a range",
			group: "{{range .Changes}}{{.Object}}{{else}}{{.Grp}}{{end}}", says: ".Grp is not a variable"},
		{name: "refuses a typo in a parenthesised pipeline",
			single: "{{printf \"%s\" (.Objekt)}}", says: ".Objekt is not a variable"},
		{name: "refuses a change's field read off the group template's whole commit, where it is empty",
			group: "{{.Target}}: {{.Verb}} {{.Object}} and more", says: ".Verb is a field of each change"},
		{name: "refuses a change's field read off the root inside a range of the group template",
			group: "{{range .Changes}}{{$.Object}}{{end}}", says: ".Object is a field of each change"},
		{name: "refuses a change's field in an if of the group template",
			group: "{{if .Changes}}{{.Kind}}{{end}}", says: ".Kind is a field of each change"},
		{name: "refuses a commit's field read off a change inside a conditional range body",
			group: `{{range .Changes}}{{if eq .Verb "Delete"}}{{.Author}}{{end}}{{end}}`, says: ".Author is a field of the whole commit, not of each change"},
		{name: "refuses a commit's field read off the change a with picks",
			single: "{{with index .Changes 0}}{{.Target}}{{end}}", says: ".Target is a field of the whole commit"},
		{name: "refuses the name of the embedded change, which is no variable",
			single: "{{.MessageChange}}", says: ".MessageChange is not a variable"},
		{name: "accepts a commit's field read off the root inside a range",
			group: "{{range .Changes}}{{$.Author}} {{.Verb}}{{end}}{{range $.Changes}}{{.Kind}}{{end}}"},
		{name: "accepts what dot holds inside a with of a commit's field",
			single: "{{with .Target}}{{.}}{{end}} {{with .Changes}}{{len .}}{{end}}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckMessageFields(tc.single, tc.group)
			if tc.says == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidTemplate)
			assert.ErrorContains(t, err, tc.says)
		})
	}
}
