package batch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
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
	// MessageChange fields of the one change, so a single-change template can say
	// {{.Verb}} {{.Object}}; empty for the group template (CheckMessageFields refuses them
	// there).
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
	// As at commit time: the single template sees one change and its fields, the group
	// template the list of several.
	sample := MessageChange{Verb: "Update", Kind: "ConfigMap", Namespace: "ns", Name: "name", Object: "ConfigMap ns/name", Path: "p/ns/configmaps/name.yaml"}
	for _, changes := range [][]MessageChange{{sample}, {sample, sample}} {
		if _, err := m.render("ns/target", "someone", changes, maxMessage); err != nil {
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
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("%w: %s: {{define}} and {{block}} are not supported", ErrInvalidTemplate, name)
	}
	if err := bounded(t.Root, 0); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidTemplate, name, err)
	}
	return t, nil
}

// bounded refuses what makes a template's work grow faster than its changes: a range
// inside a range (each level multiplies by up to a whole window's changes, and
// text/template can be neither stopped nor timed out), a range over anything but
// .Changes (a number, in whatever variable, is as large as its author writes it) and
// {{template}} (a fan-out without a range). A GitTarget's template runs in the webhook,
// the controller and the branch worker, shared by every target of the branch. Pure.
func bounded(node parse.Node, ranges int) error {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := bounded(c, ranges); err != nil {
				return err
			}
		}
	case *parse.IfNode:
		return errors.Join(bounded(n.List, ranges), bounded(n.ElseList, ranges))
	case *parse.WithNode:
		return errors.Join(bounded(n.List, ranges), bounded(n.ElseList, ranges))
	case *parse.RangeNode:
		if ranges > 0 {
			return errors.New("a {{range}} inside a {{range}} is not supported")
		}
		if !overChanges(n.Pipe) {
			return errors.New("{{range}} is supported over .Changes only")
		}
		return errors.Join(bounded(n.List, ranges+1), bounded(n.ElseList, ranges))
	case *parse.TemplateNode:
		return errors.New("{{template}} is not supported")
	}
	return nil
}

// overChanges reports whether a range's pipeline is .Changes or $.Changes alone (its
// variables declared or not).
func overChanges(pipe *parse.PipeNode) bool {
	if pipe == nil || len(pipe.Cmds) != 1 || len(pipe.Cmds[0].Args) != 1 {
		return false
	}
	switch arg := pipe.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return len(arg.Ident) == 1 && arg.Ident[0] == "Changes"
	case *parse.VariableNode:
		return len(arg.Ident) == 2 && arg.Ident[0] == "$" && arg.Ident[1] == "Changes"
	}
	return false
}

// maxWork bounds the text one rendering may build with the functions that make strings
// (print, printf, println, html, js, urlquery), whether or not it writes it: a variable
// doubled by each {{$x = print $x $x}} fills memory without a byte of output.
const maxWork = 4 * maxMessage

// maxBuilt bounds one call of those functions, judged before it runs (a printf of many
// %01000000d verbs would build hundreds of megabytes in one go), and so the size of any
// text a template holds in a variable.
const maxBuilt = 64 << 10

// budgeted returns the string-making functions of text/template, failing a call whose
// result could exceed maxBuilt, judged from its arguments before it runs, and any once the
// rendering they belong to has built maxWork bytes with them.
func budgeted() template.FuncMap {
	used := 0
	build := func(estimate int, make func() string) (string, error) {
		if estimate > maxBuilt {
			return "", fmt.Errorf("a call would build more than %d bytes of text", maxBuilt)
		}
		// The estimate is charged before the call: judging it printed the arguments, which
		// a verb may then drop (%.0s).
		if used += estimate; used > maxWork {
			return "", fmt.Errorf("the template builds more than %d bytes of text", maxWork)
		}
		s := make()
		used += max(0, len(s)-estimate)
		return s, nil
	}
	const escaped = 6 // js writes \u003C for <, and printf's % #x 5 bytes, for one
	return template.FuncMap{
		"print": func(a ...any) (string, error) { return build(sizeOf(a), func() string { return fmt.Sprint(a...) }) },
		"println": func(a ...any) (string, error) {
			return build(sizeOf(a)+len(a), func() string { return fmt.Sprintln(a...) })
		},
		"printf": func(f string, a ...any) (string, error) {
			return build(len(f)+escaped*sizeOf(a)+widths(f), func() string { return fmt.Sprintf(f, a...) })
		},
		"html": func(a ...any) (string, error) {
			return build(escaped*sizeOf(a), func() string { return template.HTMLEscaper(a...) })
		},
		"js": func(a ...any) (string, error) {
			return build(escaped*sizeOf(a), func() string { return template.JSEscaper(a...) })
		},
		"urlquery": func(a ...any) (string, error) {
			return build(escaped*sizeOf(a), func() string { return template.URLQueryEscaper(a...) })
		},
	}
}

// sizeOf is how long args print: a string's length, and what any other value (a change,
// the list of them: bounded by the window) prints as. Pure.
func sizeOf(args []any) int {
	n := 0
	for _, a := range args {
		if s, ok := a.(string); ok {
			n += len(s)
		} else {
			n += len(fmt.Sprint(a))
		}
	}
	return n
}

// widths sums what a printf format may add to its arguments: the widths and precisions it
// asks for (each pads up to that many bytes) and, per verb, the longest a number prints as
// (a float, 330 bytes) or fmt's note on a missing argument. A width taken from an argument
// (*) or an argument index ([n], which prints one argument any number of times) counts as
// past any bound. Pure.
func widths(f string) int {
	const perVerb = 350
	total := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		total += perVerb
		n := 0
		for i++; i < len(f) && strings.IndexByte("+-# 0123456789.*[]", f[i]) >= 0; i++ {
			switch c := f[i]; {
			case c == '*' || c == '[':
				return maxBuilt + 1
			case c >= '0' && c <= '9':
				n = min(n*10+int(c-'0'), maxBuilt+1)
			default:
				total, n = total+n, 0
			}
		}
		total += n
		if total > maxBuilt {
			return total
		}
	}
	return total
}

// maxMessage bounds what a GitTarget's template may write: past it, the commit takes the
// default message (Render), as for a template that fails.
const maxMessage = 1 << 20

// errMessageTooLong is the error of a rendering past its limit.
var errMessageTooLong = fmt.Errorf("the message would exceed %d bytes", maxMessage)

// cappedBuffer is a bytes.Buffer that refuses to grow past limit (0: no limit).
type cappedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.limit > 0 && b.Len()+len(p) > b.limit {
		return 0, errMessageTooLong
	}
	return b.Buffer.Write(p)
}

// render executes t, writing at most limit bytes and building at most maxWork with its
// functions (limit 0: no limit, for the defaults, whose work follows the changes).
func render(t *template.Template, data MessageData, limit int) (string, error) {
	if limit > 0 {
		clone, err := t.Clone()
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrInvalidTemplate, t.Name(), err)
		}
		t = clone.Funcs(budgeted()) // a budget of its own for each rendering
	}
	buf := cappedBuffer{limit: limit}
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
	out, _ := m.RenderOrDefault(target, author, changes)
	return out
}

// RenderOrDefault is Render that also says why the GitTarget's template was not used
// (fellBack nil when it was, or when it rendered only whitespace): the writer logs it, since
// a template that fails at commit time is otherwise ignored without a trace.
func (m Messages) RenderOrDefault(target, author string, changes []MessageChange) (out string, fellBack error) {
	if m.single != nil {
		out, err := m.render(target, author, changes, maxMessage)
		if err == nil && strings.TrimSpace(out) != "" {
			return out, nil
		}
		fellBack = err
	}
	def, _ := ParseMessages("", "")
	out, _ = def.render(target, author, changes, 0) // a snapshot's list may be long
	return out, fellBack
}

func (m Messages) render(target, author string, changes []MessageChange, limit int) (string, error) {
	data := MessageData{Target: target, Author: author, Changes: changes}
	if len(changes) == 1 {
		data.MessageChange = changes[0]
		return render(m.single, data, limit)
	}
	return render(m.group, data, limit)
}
