package batch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template"
)

// Default commit message templates; see docs/configuration.md for the variables.
const (
	DefaultSingleMessage = "{{.Verb}} {{.Object}}"
	DefaultGroupMessage  = "{{.Target}}: {{len .Changes}} changes by {{.Author}}\n{{range .Changes}}\n- {{.Verb}} {{.Object}}{{end}}\n"
)

// ErrInvalidTemplate marks a commit message template that does not parse or render.
var ErrInvalidTemplate = errors.New("invalid commit message template")

// MessageChange is one change as commit message templates see it.
type MessageChange struct {
	// Verb is Create, Update or Delete.
	Verb      string
	Group     string
	Kind      string
	Namespace string
	Name      string
	// Object reads like "ConfigMap team-a/app" or "apps/Deployment team-a/api".
	Object string
	// Path is the file the change touched.
	Path string
}

// MessageData is what commit message templates render.
type MessageData struct {
	// Target is the GitTarget as namespace/name.
	Target string
	// Author is the username the API server authenticated for the window's changes, or the
	// committer's name when unknown: what a reviewer asks first of a commit.
	Author  string
	Changes []MessageChange
	// MessageChange fields of the first change, so a single-change template can say
	// {{.Verb}} {{.Object}}.
	MessageChange
}

// Messages are parsed commit message templates.
type Messages struct {
	single *template.Template
	group  *template.Template
}

// ParseMessages parses the two templates ("" means the default) and renders them once with
// sample data, so a template that would fail at commit time is refused up front.
func ParseMessages(single, group string) (Messages, error) {
	if single == "" {
		single = DefaultSingleMessage
	}
	if group == "" {
		group = DefaultGroupMessage
	}
	var m Messages
	var err error
	if m.single, err = parseOne("single", single); err != nil {
		return Messages{}, err
	}
	if m.group, err = parseOne("group", group); err != nil {
		return Messages{}, err
	}
	sample := MessageChange{Verb: "Update", Kind: "ConfigMap", Namespace: "ns", Name: "name", Object: "ConfigMap ns/name", Path: "p/ns/configmaps/name.yaml"}
	data := MessageData{Target: "ns/target", Author: "someone", Changes: []MessageChange{sample, sample}, MessageChange: sample}
	for _, t := range []*template.Template{m.single, m.group} {
		if _, err := render(t, data); err != nil {
			return Messages{}, err
		}
	}
	return m, nil
}

func parseOne(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidTemplate, name, err)
	}
	return t, nil
}

func render(t *template.Template, data MessageData) (string, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("%w: %s: %v (the variables are %s; see docs/configuration.md)", ErrInvalidTemplate, t.Name(), err, messageVariables)
	}
	return buf.String(), nil
}

// messageVariables lists what a commit message template may use, for the error of one that
// uses something else.
const messageVariables = ".Verb, .Object, .Kind, .Group, .Namespace, .Name, .Path, .Target, .Author and .Changes"

// Render writes the commit message for changes: the single template for one change, the
// group template for several. A failing or empty rendering falls back to the defaults, so a
// commit never waits on a message.
func (m Messages) Render(target, author string, changes []MessageChange) string {
	if m.single != nil {
		if out, err := m.render(target, author, changes); err == nil && strings.TrimSpace(out) != "" {
			return out
		}
	}
	def, _ := ParseMessages("", "")
	out, _ := def.render(target, author, changes)
	return out
}

func (m Messages) render(target, author string, changes []MessageChange) (string, error) {
	data := MessageData{Target: target, Author: author, Changes: changes}
	if len(changes) == 1 {
		data.MessageChange = changes[0]
		return render(m.single, data)
	}
	return render(m.group, data)
}
