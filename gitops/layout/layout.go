// Package layout decides whether GitOps Reverser can own a folder, and
// indexes the objects it holds.
//
// The verdict is a pure function of the folder's files, so the admission
// webhook and the writer give the same answer with the same words (and so
// will the offline manifest-analyzer the design plans). Only plain folders are supported today: YAML
// manifests plus documentation. Anything whose meaning a writer could break
// (Kustomize files, scripts, symlinks, submodules, unparseable YAML, YAML
// the editor cannot own safely such as anchors and custom tags, duplicate
// objects) makes the folder unsupported, naming the first offending file
// and counting the others refused by kind or name.
package layout

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
)

// EntryKind is the Git tree entry type of a file, as read from the tree
// (mode), never from the working copy.
type EntryKind int

const (
	// Regular is a non-executable blob (mode 100644); the zero value, since
	// it is what almost every entry is.
	Regular EntryKind = iota
	// Executable is an executable blob (mode 100755).
	Executable
	// Symlink is a symbolic link (mode 120000).
	Symlink
	// Submodule is a gitlink to another repository (mode 160000).
	Submodule
)

// String names the kind for messages and test output.
func (k EntryKind) String() string {
	switch k {
	case Regular:
		return "regular file"
	case Executable:
		return "executable file"
	case Symlink:
		return "symbolic link"
	case Submodule:
		return "Git submodule"
	default:
		return fmt.Sprintf("EntryKind(%d)", int(k))
	}
}

// File is one entry under the folder: Path is repository-relative with
// forward slashes, Content the blob (empty for symlinks and submodules).
// Docs, when not nil, is manifest.Parse's result for this very content from
// an earlier analysis (the caller knows the blob did not change), used
// instead of parsing Content again: a remote that moved by one file costs
// one parse, not one per file of the folder.
type File struct {
	Path    string
	Kind    EntryKind
	Content []byte
	Docs    []manifest.DocInfo
}

// Location is where an object's document lives: the file and the 0-based
// document index of manifest.DocInfo, with the document's value digest so
// the writer can see an object is unchanged without parsing the file.
type Location struct {
	File   string
	Doc    int
	Digest manifest.Digest
}

// Index maps every object in a folder to its document, so a change finds
// the document to edit without scanning the folder.
type Index map[manifest.Identity]Location

// Verdict says whether a folder can be owned and, if not, which file stops
// it and why, in words fit for a kubectl denial or a status condition.
type Verdict struct {
	Supported bool
	// Reason completes the sentence "<File> ...", e.g. "is a symbolic link".
	Reason string
	// File is the first offending file in sorted order; empty when
	// Supported.
	File string
	// Folder is the folder analysed, repeated in Message. (Beyond the
	// original design card: Message cannot name the folder without it.)
	Folder string
	// Fix says what makes the folder ownable again, e.g. "clear its executable bit";
	// empty when the reason says it already.
	Fix string
	// More counts the other files that stop the folder by their kind or name (scripts,
	// links, Kustomize files…), so a person fixing the first knows it is not the last;
	// manifests after the first refusal are not parsed, so their problems are not counted.
	More int
}

// Message renders the verdict as one sentence, e.g. "folder live cannot be
// owned: live/x/run.sh is not a YAML manifest or documentation (only
// .yaml/.yml manifests and docs such as README.md may live in the folder);
// move it out of the folder".
func (v Verdict) Message() string {
	folder := v.Folder
	if folder == "" {
		folder = "."
	}
	if v.Supported {
		return fmt.Sprintf("folder %s can be owned", folder)
	}
	msg := fmt.Sprintf("folder %s cannot be owned: %s %s", folder, v.File, v.Reason)
	if v.Fix != "" {
		msg += "; " + v.Fix
	}
	if v.More > 0 {
		msg += fmt.Sprintf(" (and %d more file(s) the folder may not hold)", v.More)
	}
	return msg
}

// Reasons used in verdicts; tests and docs quote them.
const (
	ReasonNotInFolder  = "is not inside the folder"
	ReasonNotAFolder   = "is not a folder in Git: a file, link or submodule is at that path or above it (the target's path must be a folder, or not exist yet)"
	ReasonSymlink      = "is a symbolic link (links may point outside the folder and are never followed)"
	ReasonSubmodule    = "is a Git submodule (its content lives in another repository)"
	ReasonExecutable   = "is an executable file (only plain manifests and docs may live in the folder)"
	ReasonKustomize    = "is a Kustomize file (Kustomize layouts are not supported yet)"
	ReasonUnsupported  = "is not a YAML manifest or documentation (only .yaml/.yml manifests and docs such as README.md may live in the folder)"
	reasonUnparseable  = "is not a valid manifest: %s"
	reasonUneditable   = "is a manifest the mirror cannot edit safely: %s"
	reasonDuplicateObj = "defines %s (document %d), which %s also defines (duplicate object)"
)

// Fixes that follow the reasons in a verdict's message.
const (
	fixMoveOut    = "move it out of the folder"
	fixSymlink    = "replace it with a copy of what it points to, or move it out of the folder"
	fixSubmodule  = "remove it from the folder (git rm)"
	fixExecutable = "clear its executable bit (git update-index --chmod=-x) and push"
	fixKustomize  = "point the GitTarget at a folder without one, or, if it only lists the folder's files, delete it (Flux then applies every manifest under the folder; Argo CD needs directory.recurse: true for its subfolders)"
	fixListed     = "remove that entry, or point the GitTarget at a folder no Kustomize file refers to"
	fixParse      = "fix it so it parses, or move it out of the folder"
	fixUneditable = "write that document without anchors, aliases, merge keys, custom tags or duplicate keys"
	fixDuplicate  = "delete one of the two documents"
)

// problem is why a file stops a folder from being owned, and what fixes it.
type problem struct{ reason, fix string }

// Analyze decides whether folder can be owned, given every file under it,
// and indexes the objects of a supported folder. Supported files are
// .yaml/.yml manifests that manifest.Parse accepts (sops-encrypted ones
// included), sops configuration (.sops.yaml, not indexed) and documentation
// (*.md, *.txt, *.rst, LICENSE*, OWNERS*, .gitkeep, .keep, .gitignore). The
// first offending file in sorted path order makes the folder unsupported:
// a symlink, a submodule, an executable, a Kustomize file, unparseable YAML,
// YAML the editor cannot own safely (anchors, aliases, merge keys, custom
// tags, duplicate keys), an object already defined elsewhere, or any other
// file; the verdict counts the other files refused by kind or name (More). An unsupported
// folder has a nil Index. files is not modified.
func Analyze(folder string, files []File) (Verdict, Index) {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })

	index := Index{}
	var refused *Verdict
	for _, f := range sorted {
		p := checkFile(folder, f)
		if refused != nil { // only counted, by kind and name: a refused folder's manifests need no parse
			if p.reason != "" {
				refused.More++
			}
			continue
		}
		if p.reason == "" && isManifest(f.Path) && !isSopsConfig(path.Base(f.Path)) {
			p = indexManifest(index, f)
		}
		if p.reason != "" {
			refused = &Verdict{Reason: p.reason, Fix: p.fix, File: f.Path, Folder: folder}
		}
	}
	if refused != nil {
		return *refused, nil
	}
	return Verdict{Supported: true, Folder: folder}, index
}

// checkFile returns why a file cannot live in an owned folder, judged by
// its place, entry kind and name, or no reason when it may.
func checkFile(folder string, f File) problem {
	if !plan.Within(folder, f.Path) {
		return problem{ReasonNotInFolder, ""}
	}
	switch f.Kind {
	case Symlink:
		return problem{ReasonSymlink, fixSymlink}
	case Submodule:
		return problem{ReasonSubmodule, fixSubmodule}
	case Executable:
		return problem{ReasonExecutable, fixExecutable}
	case Regular:
	default:
		return problem{fmt.Sprintf("has an unknown entry kind %s", f.Kind), fixMoveOut}
	}
	name := path.Base(f.Path)
	switch {
	case isKustomization(name):
		return problem{ReasonKustomize, fixKustomize}
	case isManifest(name), isDocumentation(name): // .sops.yaml is a manifest name too
		return problem{}
	default:
		return problem{ReasonUnsupported, fixMoveOut}
	}
}

// indexManifest parses a manifest file and adds its objects to index,
// returning why the file is refused, or no reason.
func indexManifest(index Index, f File) problem {
	docs := f.Docs
	if docs == nil {
		var err error
		if docs, err = manifest.Parse(f.Content); err != nil {
			return refusedManifest(err)
		}
	}
	for _, doc := range docs {
		if doc.Empty {
			continue
		}
		if prev, ok := index[doc.Identity]; ok {
			return problem{fmt.Sprintf(reasonDuplicateObj, doc.Identity, doc.Index+1, describeLocation(prev, f.Path)), fixDuplicate}
		}
		index[doc.Identity] = Location{File: f.Path, Doc: doc.Index, Digest: doc.Digest}
	}
	return problem{}
}

// refusedManifest turns a manifest.Parse error into a reason. The reason
// already says what kind of problem it is; the details (document, line,
// construct) follow.
func refusedManifest(err error) problem {
	if errors.Is(err, manifest.ErrUnsupportedDocument) {
		return problem{fmt.Sprintf(reasonUneditable, strings.TrimPrefix(err.Error(), manifest.ErrUnsupportedDocument.Error()+": ")), fixUneditable}
	}
	return problem{fmt.Sprintf(reasonUnparseable, strings.TrimPrefix(err.Error(), manifest.ErrUnparseable.Error()+": ")), fixParse}
}

// describeLocation names where an object was first found, relative to the
// file now being read.
func describeLocation(loc Location, current string) string {
	if loc.File == current {
		return fmt.Sprintf("document %d of the same file", loc.Doc+1)
	}
	return fmt.Sprintf("%s (document %d)", loc.File, loc.Doc+1)
}

// isManifest reports whether a path names a YAML manifest. Extensions are
// matched exactly (lower case), as Flux and Kustomize do.
func isManifest(p string) bool {
	return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
}

// isSopsConfig reports whether a file name is sops' configuration (creation rules), which
// the writer keeps in step with a target's age recipients; it holds no object.
func isSopsConfig(name string) bool {
	return name == ".sops.yaml"
}

// isKustomization reports whether a file name is one Kustomize reads as a
// kustomization; writing beside one would not reach the cluster as written.
func isKustomization(name string) bool {
	// In any letter case: on a macOS or Windows checkout `kustomize build` of the folder
	// reads KUSTOMIZATION.yaml as the folder's Kustomization (the writer never names a
	// file so either, plan.reservedFileName).
	return strings.EqualFold(name, "kustomization.yaml") || strings.EqualFold(name, "kustomization.yml") ||
		strings.EqualFold(name, "kustomization")
}

// isDocumentation reports whether a file name is documentation or Git
// bookkeeping that no GitOps tool applies.
func isDocumentation(name string) bool {
	switch name {
	case ".gitkeep", ".keep", ".gitignore":
		return true
	}
	if strings.HasPrefix(name, "LICENSE") || strings.HasPrefix(name, "OWNERS") {
		return true
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".txt", ".rst":
		return true
	}
	return false
}
