// Package plan decides where a new document goes inside a GitTarget folder.
//
// Paths are repository-relative and always use forward slashes (Git's
// separator), whatever the host OS. Every function here is lexical: it never
// touches the file system, so the same answer is given by the admission
// webhook (prediction) and the branch worker (write).
package plan

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClusterScopeSegment is the namespace segment used for cluster-scoped
// objects. Underscores are illegal in namespace names, so it can never
// collide with a real namespace.
const ClusterScopeSegment = "_cluster"

// ManifestSuffix ends the file name of plain manifests.
const ManifestSuffix = ".yaml"

// SensitiveSuffix ends the file name of SOPS-encrypted manifests, so Flux,
// SOPS creation rules and people can tell them apart at a glance.
const SensitiveSuffix = ".sops.yaml"

// ErrUnsafeName is returned when an object's namespace, group, resource or
// name cannot be used as a path segment without escaping the folder or
// producing an ambiguous path. It is an expected outcome for hostile or
// broken input, so callers can deny the change with errors.Is.
var ErrUnsafeName = errors.New("unsafe path segment")

// ErrUnsafeFolder is returned when the folder itself is not a clean,
// relative, slash-separated path inside the repository.
var ErrUnsafeFolder = errors.New("unsafe folder")

// CanonicalPath returns where a new document for the object is written:
// {folder}/{namespace}/{group}/{resource}/{name}.yaml, with the group segment
// omitted for the core group, "_cluster" as the namespace of cluster-scoped
// objects (namespace ""), and ".sops.yaml" as the suffix of sensitive
// objects. It returns an error wrapping ErrUnsafeName (naming the object)
// when a segment is empty, ".", "..", ".git", or contains "/" or NUL, and one
// wrapping ErrUnsafeFolder when folder is absolute or escapes the repository,
// so the result is always inside folder (see Within). An empty folder or "."
// means the repository root.
func CanonicalPath(folder string, gvr schema.GroupVersionResource, namespace, name string, sensitive bool) (string, error) {
	root, err := cleanFolder(folder)
	if err != nil {
		return "", err
	}
	segments, err := objectSegments(gvr, namespace, name, sensitive)
	if err != nil {
		return "", err
	}
	return path.Join(append([]string{root}, segments...)...), nil
}

// Within reports whether p names something strictly inside folder, i.e.
// below folder/. Both are repository-relative, slash-separated paths; an
// empty folder or "." is the repository root. p must already be clean:
// "live/./x.yaml" or "live/a/../x.yaml" are refused, because a path that
// needs cleaning did not come from this package or from a Git tree.
func Within(folder, p string) bool {
	root, err := cleanFolder(folder)
	if err != nil {
		return false
	}
	if p == "" || p != path.Clean(p) || path.IsAbs(p) || strings.ContainsRune(p, 0) {
		return false
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return false
	}
	if root == "." {
		return p != "."
	}
	return strings.HasPrefix(p, root+"/")
}

// CheckFolder returns the error CanonicalPath gives for every object of folder (wrapping
// ErrUnsafeFolder), nil when objects can be written into it: a GitTarget whose path the
// CRD's rules did not refuse when it was stored is told so once, not object by object.
func CheckFolder(folder string) error {
	_, err := cleanFolder(folder)
	return err
}

// cleanFolder normalises a folder to a clean relative path ("." for the
// repository root) and refuses absolute or escaping folders.
func cleanFolder(folder string) (string, error) {
	if strings.ContainsRune(folder, 0) {
		return "", fmt.Errorf("%w: %q contains a NUL byte", ErrUnsafeFolder, folder)
	}
	if path.IsAbs(folder) {
		return "", fmt.Errorf("%w: %q is absolute; folders are relative to the repository root", ErrUnsafeFolder, folder)
	}
	root := path.Clean(folder)
	if root == ".." || strings.HasPrefix(root, "../") {
		return "", fmt.Errorf("%w: %q leaves the repository", ErrUnsafeFolder, folder)
	}
	for _, segment := range strings.Split(root, "/") {
		if strings.EqualFold(segment, ".git") {
			return "", fmt.Errorf("%w: %q enters the .git directory", ErrUnsafeFolder, folder)
		}
	}
	return root, nil
}

// objectSegments returns the checked path segments below the folder for one
// object: namespace, optional group, resource and file name.
func objectSegments(gvr schema.GroupVersionResource, namespace, name string, sensitive bool) ([]string, error) {
	object := describe(gvr, namespace, name)
	nsSegment := namespace
	if namespace == "" {
		nsSegment = ClusterScopeSegment
	} else if namespace == ClusterScopeSegment {
		return nil, fmt.Errorf("%w: %s: namespace %q is reserved for cluster-scoped objects", ErrUnsafeName, object, namespace)
	}

	type part struct{ what, value string }
	parts := []part{{"namespace", nsSegment}}
	if gvr.Group != "" {
		parts = append(parts, part{"group", gvr.Group})
	}
	parts = append(parts, part{"resource", gvr.Resource}, part{"name", name})

	segments := make([]string, 0, len(parts))
	for _, p := range parts {
		if why := unsafeSegment(p.value); why != "" {
			return nil, fmt.Errorf("%w: %s: %s %q %s", ErrUnsafeName, object, p.what, p.value, why)
		}
		segments = append(segments, p.value)
	}

	suffix := ManifestSuffix
	if sensitive {
		suffix = SensitiveSuffix
	}
	segments[len(segments)-1] += suffix
	if why := reservedFileName(segments[len(segments)-1]); why != "" {
		return nil, fmt.Errorf("%w: %s: its file would be named %s, %s", ErrUnsafeName, object, segments[len(segments)-1], why)
	}
	return segments, nil
}

// maxFileName is the longest file name ext4, XFS, APFS and NTFS all hold, in bytes: an object
// name may have 253 characters, and its file adds ".yaml" or ".sops.yaml".
const maxFileName = 255

// reservedFileName explains why an object's file cannot have this name, which tools read as
// something other than a manifest (case-insensitively, as on macOS and Windows checkouts),
// or returns "".
func reservedFileName(name string) string {
	switch {
	case len(name) > maxFileName:
		return fmt.Sprintf("%d bytes long: no common file system holds a name over %d, so no checkout of the repository (Flux's, Argo CD's, a person's) would work", len(name), maxFileName)
	case strings.EqualFold(name, "kustomization.yaml"):
		return "which Kustomize and Flux read as the folder's Kustomization (so the folder could no longer be owned)"
	case strings.EqualFold(name, ".sops.yaml"):
		return "which the sops CLI reads as the folder's encryption rules"
	case strings.EqualFold(name, "cloudbuild.yaml"), strings.EqualFold(name, ".flux.yaml"), strings.EqualFold(name, ".golangci.yaml"):
		return "which Flux's source-controller leaves out of every artifact by default (its built-in ignore list), so the object would never be deployed"
	}
	return ""
}

// unsafeSegment explains why s cannot be a single path segment, or returns
// "" when it can. ".git" is refused (case-insensitively, as on macOS and
// Windows checkouts) so nothing is ever planned inside a repository's
// metadata directory.
func unsafeSegment(s string) string {
	switch {
	case s == "":
		return "is empty"
	case s == "." || s == "..":
		return "is a relative path element"
	case strings.EqualFold(s, ".git"):
		return "names the Git metadata directory"
	case strings.EqualFold(s, "git~1"):
		return "names the Git metadata directory on Windows (its short name)"
	case strings.Contains(s, "/"):
		return "contains a slash"
	case strings.ContainsRune(s, 0):
		return "contains a NUL byte"
	case strings.Contains(s, `\`):
		return "contains a backslash, a path separator on Windows"
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "contains a control character"
	default:
		return ""
	}
}

// describe names an object the way kubectl does ("deployments.apps
// team-a/api", "clusterroles.rbac.authorization.k8s.io admin") for error
// messages.
func describe(gvr schema.GroupVersionResource, namespace, name string) string {
	resource := gvr.Resource
	if gvr.Group != "" {
		resource += "." + gvr.Group
	}
	if namespace == "" {
		return fmt.Sprintf("%s %q", resource, name)
	}
	return fmt.Sprintf("%s %q", resource, namespace+"/"+name)
}
