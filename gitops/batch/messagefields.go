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
		if err := knownFields(t.Root, tt.group, true); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidTemplate, tt.name, err)
		}
	}
	return nil
}

// knownFields walks a template's nodes for the fields they read (see CheckMessageFields).
// dotIsCommit says whether dot is still the whole commit's data there: {{range}} and
// {{with}} move it. Pure.
func knownFields(node parse.Node, group, dotIsCommit bool) error {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := knownFields(c, group, dotIsCommit); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return knownFields(n.Pipe, group, dotIsCommit)
	case *parse.IfNode:
		return branchFields(&n.BranchNode, group, dotIsCommit, dotIsCommit)
	case *parse.WithNode:
		return branchFields(&n.BranchNode, group, dotIsCommit, false)
	case *parse.RangeNode:
		return branchFields(&n.BranchNode, group, dotIsCommit, false)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			for _, arg := range c.Args {
				if err := knownFields(arg, group, dotIsCommit); err != nil {
					return err
				}
			}
		}
	case *parse.ChainNode:
		if err := knownFields(n.Node, group, dotIsCommit); err != nil {
			return err
		}
		return fieldNames(n.Field)
	case *parse.FieldNode:
		return readField(n.Ident, group && dotIsCommit)
	case *parse.VariableNode:
		return readField(n.Ident[1:], group && n.Ident[0] == "$")
	}
	return nil
}

// branchFields walks an if, with or range: its pipeline where it stands, its body with dot
// as the body sees it (inner), its else branch with dot unmoved.
func branchFields(n *parse.BranchNode, group, dotIsCommit, inner bool) error {
	if err := knownFields(n.Pipe, group, dotIsCommit); err != nil {
		return err
	}
	if err := knownFields(n.List, group, inner); err != nil {
		return err
	}
	return knownFields(n.ElseList, group, dotIsCommit)
}

// readField checks the field names of one reference; onCommit says the first is read off
// the group template's whole commit, where a change's fields are empty. Pure.
func readField(names []string, onCommit bool) error {
	if len(names) == 0 {
		return nil
	}
	if err := fieldNames(names); err != nil {
		return err
	}
	if f, _ := reflect.TypeFor[MessageData]().FieldByName(names[0]); onCommit && (len(f.Index) > 1 || f.Anonymous) {
		return fmt.Errorf(".%s is a field of each change, empty for the commit as a whole: read it inside {{range .Changes}}", names[0])
	}
	return nil
}

// fieldNames refuses a name that is no field of the templates' data. Pure.
func fieldNames(names []string) error {
	for _, name := range names {
		if _, ok := reflect.TypeFor[MessageData]().FieldByName(name); !ok {
			return fmt.Errorf(".%s is not a variable (the variables are %s)", name, messageVariables)
		}
	}
	return nil
}
