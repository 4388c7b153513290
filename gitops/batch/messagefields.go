package batch

import (
	"fmt"
	"reflect"
	"text/template/parse"
)

// CheckMessageFields refuses, in the two templates ("" means the default), a field no
// variable has (a typo such as {{.Obj}}) wherever it is, and in the group template a
// change's field read off the whole commit ({{.Verb}} outside {{range .Changes}}, or
// {{$.Verb}}), which renders empty there. ParseMessages' sample rendering runs only the
// branches its sample takes, so {{if eq .Verb "Delete"}}{{.Obj}}{{end}} passes it and fails
// at every delete, whose commit then falls back to the default message. The admission
// webhook asks this of new and changed templates only: a stored template keeps working
// as it did, falling back where it fails.
func CheckMessageFields(single, group string) error {
	for _, tt := range []struct {
		name, text string
		group      bool
	}{{"single", single, false}, {"group", group, true}} {
		if tt.text == "" {
			continue
		}
		t, err := parseOne(tt.name, tt.text)
		if err != nil {
			return err
		}
		if err := knownFields(t.Root, tt.group, dotCommit); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidTemplate, tt.name, err)
		}
	}
	return nil
}

// dot is what dot holds where a template node stands, as far as the walk can tell.
type dot int

const (
	// dotCommit is the templates' data (MessageData).
	dotCommit dot = iota
	// dotChange is one change: the body of {{range .Changes}}, {{with index .Changes 0}}.
	dotChange
	// dotOther is anything else ({{with .Target}}, a range over a variable): its fields
	// are checked against every variable's name only.
	dotOther
)

// knownFields walks a template's nodes for the fields they read (see CheckMessageFields),
// with at what dot holds there: {{range}} and {{with}} move it. Pure.
func knownFields(node parse.Node, group bool, at dot) error {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := knownFields(c, group, at); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return knownFields(n.Pipe, group, at)
	case *parse.IfNode:
		return branchFields(&n.BranchNode, group, at, at)
	case *parse.WithNode:
		return branchFields(&n.BranchNode, group, at, movedDot(n.Pipe, at, false))
	case *parse.RangeNode:
		return branchFields(&n.BranchNode, group, at, movedDot(n.Pipe, at, true))
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			for _, arg := range c.Args {
				if err := knownFields(arg, group, at); err != nil {
					return err
				}
			}
		}
	case *parse.ChainNode:
		if err := knownFields(n.Node, group, at); err != nil {
			return err
		}
		return fieldNames(n.Field)
	case *parse.FieldNode:
		return readField(n.Ident, group, at)
	case *parse.VariableNode:
		if n.Ident[0] == "$" {
			return readField(n.Ident[1:], group, dotCommit)
		}
		return readField(n.Ident[1:], group, dotOther) // a variable of a range or with
	}
	return nil
}

// movedDot is what dot holds in the body of a {{range}} (ranging) or {{with}} over pipe,
// standing where dot holds at: one change over .Changes (range) or index .Changes n
// (with). Pure.
func movedDot(pipe *parse.PipeNode, at dot, ranging bool) dot {
	if pipe == nil || len(pipe.Cmds) != 1 {
		return dotOther
	}
	args := pipe.Cmds[0].Args
	switch {
	case ranging && len(args) == 1 && readsChanges(args[0], at):
		return dotChange
	case !ranging && len(args) == 3 && isIdentifier(args[0], "index") && readsChanges(args[1], at):
		return dotChange
	}
	return dotOther
}

// readsChanges says whether node is .Changes of the templates' data. Pure.
func readsChanges(node parse.Node, at dot) bool {
	switch n := node.(type) {
	case *parse.FieldNode:
		return at == dotCommit && len(n.Ident) == 1 && n.Ident[0] == "Changes"
	case *parse.VariableNode:
		return len(n.Ident) == 2 && n.Ident[0] == "$" && n.Ident[1] == "Changes"
	}
	return false
}

// isIdentifier says whether node is the function name. Pure.
func isIdentifier(node parse.Node, name string) bool {
	id, ok := node.(*parse.IdentifierNode)
	return ok && id.Ident == name
}

// branchFields walks an if, with or range: its pipeline where it stands, its body with dot
// as the body sees it (inner), its else branch with dot unmoved.
func branchFields(n *parse.BranchNode, group bool, at, inner dot) error {
	if err := knownFields(n.Pipe, group, at); err != nil {
		return err
	}
	if err := knownFields(n.List, group, inner); err != nil {
		return err
	}
	return knownFields(n.ElseList, group, at)
}

// readField checks the field names of one reference read off what dot holds at: off the
// group template's whole commit a change's fields are empty, and off one change the
// commit's fields do not exist (rendering fails). Pure.
func readField(names []string, group bool, at dot) error {
	if len(names) == 0 {
		return nil
	}
	if err := fieldNames(names); err != nil {
		return err
	}
	switch at {
	case dotCommit:
		if f, _ := reflect.TypeFor[MessageData]().FieldByName(names[0]); group && len(f.Index) > 1 {
			return fmt.Errorf(".%s is a field of each change, empty for the commit as a whole: read it inside {{range .Changes}}", names[0])
		}
	case dotChange:
		if _, ok := reflect.TypeFor[MessageChange]().FieldByName(names[0]); !ok {
			return fmt.Errorf(".%s is a field of the whole commit, not of each change: read it as {{$.%s}} there", names[0], names[0])
		}
	}
	return nil
}

// fieldNames refuses a name that is no variable of the templates' data, such as the name
// of the embedded MessageChange itself. Pure.
func fieldNames(names []string) error {
	for _, name := range names {
		if f, ok := reflect.TypeFor[MessageData]().FieldByName(name); !ok || f.Anonymous {
			return fmt.Errorf(".%s is not a variable (the variables are %s)", name, messageVariables)
		}
	}
	return nil
}
