package encrypt

import (
	"fmt"
	"strings"
)

// ConfigFileName is the sops configuration file the operator keeps in each
// target folder, so people using the sops CLI there encrypt new files the
// same way the operator does.
const ConfigFileName = ".sops.yaml"

// FileSuffix ends every encrypted manifest; the creation rule matches it.
const FileSuffix = ".sops.yaml"

// sopsConfigPathRegex matches encrypted manifests at any depth under the
// folder but not the config file itself (its name is just the suffix). sops
// matches it against the file path relative to the config file's folder
// (or as typed), so it does not name the folder.
const sopsConfigPathRegex = `(^|/)[^/]+\.sops\.yaml$`

// SopsConfig renders the .sops.yaml for a target folder: one creation rule
// with EncryptedRegex and r as age recipients. The output depends
// only on folder and the recipient set, so an unchanged configuration
// produces an identical file and no commit. Recipients are written one per
// line of a folded scalar: every sops version reads it as the comma-separated
// string it supports, and a rotation diff shows one line per key.
func SopsConfig(folder string, r Recipients) ([]byte, error) {
	recipients, err := ParseRecipients(r)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Managed by gitops-reverser for folder %q: files ending in %s are\n", folder, FileSuffix)
	b.WriteString("# encrypted with sops and age; the values of data, stringData and annotations are encrypted.\n")
	b.WriteString("creation_rules:\n")
	fmt.Fprintf(&b, "  - path_regex: '%s'\n", sopsConfigPathRegex)
	fmt.Fprintf(&b, "    encrypted_regex: '%s'\n", EncryptedRegex)
	b.WriteString("    age: >-\n")
	for i, recipient := range recipients {
		sep := ","
		if i == len(recipients)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "      %s%s\n", recipient, sep)
	}
	return []byte(b.String()), nil
}
