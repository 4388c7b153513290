package repo

import (
	"fmt"
	"strings"
)

// ValidPath reports, as ErrInvalidPath, a path the writer never reads nor writes: one that
// is not clean, relative and slash-separated, or holds a backslash, a control character
// or a .git segment. Git may hold such a file (a person's commit); the writer refuses the
// object it holds, and admission says so before (it shares this check).
func ValidPath(p string) error { return validatePath(p) }

// validatePath accepts only clean, relative, slash-separated paths inside the
// repository, so that no write can escape the tree or touch .git, and every
// tree Commit builds passes `git fsck --strict`.
func validatePath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("%q: %w", p, ErrInvalidPath)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\' {
			return fmt.Errorf("%q: %w", p, ErrInvalidPath)
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if err := validateSegment(seg); err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
	}
	return nil
}

// validateSegment rejects empty, relative and .git-like path segments
// (including the NTFS short name git~1).
func validateSegment(seg string) error {
	switch strings.ToLower(seg) {
	case "", ".", "..", ".git", "git~1":
		return ErrInvalidPath
	}
	return nil
}

// cleanFolder normalises a folder argument: "" and "." mean the root, a
// trailing slash is ignored; anything else must be a valid path.
func cleanFolder(folder string) (string, error) {
	folder = strings.TrimSuffix(folder, "/")
	if folder == "" || folder == "." {
		return "", nil
	}
	if err := validatePath(folder); err != nil {
		return "", fmt.Errorf("folder: %w", err)
	}
	return folder, nil
}

// splitPath splits a clean path into segments; the root has none.
func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
