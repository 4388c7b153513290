package layout

import (
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
)

// Reasons for Kustomize files above the folder.
const (
	ReasonListedAbove = "is a Kustomize file above the folder that refers to %s inside it " +
		"(Kustomize layouts are not supported yet: a file the writer adds would not be listed there, " +
		"one it removes would break the build)"
	reasonUnparseableAbove = "is a Kustomize file above the folder that does not parse, " +
		"so whether it refers to files of the folder cannot be told: %s"
)

// KustomizationsAbove lists where a Kustomize file may sit in the directories above folder
// (its parent up to the repository root), nearest first, for KustomizeAbove to judge.
func KustomizationsAbove(folder string) []string {
	folder = path.Clean(folder)
	var out []string
	for dir := folder; dir != "." && dir != "/" && dir != ""; {
		dir = path.Dir(dir)
		for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
			out = append(out, path.Join(dir, name))
		}
	}
	return out
}

// KustomizeAbove judges the Kustomize files found above folder (files: path and content,
// as listed by KustomizationsAbove): one that refers to a path inside the folder (a
// resource, component, patch, generator input, …) makes the folder unsupported, since the
// writer would add files it does not list and remove files it lists. One that only refers
// elsewhere is fine. A file that does not parse is refused: it cannot be told apart. Pure.
func KustomizeAbove(folder string, files []File) Verdict {
	for _, f := range files {
		var k types.Kustomization
		if err := sigsyaml.Unmarshal(f.Content, &k); err != nil {
			return Verdict{Reason: fmt.Sprintf(reasonUnparseableAbove, err), File: f.Path, Folder: folder}
		}
		dir := path.Dir(f.Path)
		for _, ref := range kustomizationPaths(&k) {
			if remote(ref) {
				continue
			}
			target := path.Clean(path.Join(dir, ref))
			if target == path.Clean(folder) || plan.Within(folder, target) {
				return Verdict{Reason: fmt.Sprintf(ReasonListedAbove, ref), File: f.Path, Folder: folder}
			}
		}
	}
	return Verdict{Supported: true, Folder: folder}
}

// kustomizationPaths lists every local path a kustomization refers to, as written.
func kustomizationPaths(k *types.Kustomization) []string {
	var out []string
	for _, list := range [][]string{k.Resources, k.Components, k.Crds, k.Bases, k.Configurations,
		k.Generators, k.Transformers, k.Validators} {
		out = append(out, list...)
	}
	for _, p := range k.Patches {
		out = append(out, p.Path)
	}
	for _, p := range k.PatchesJson6902 {
		out = append(out, p.Path)
	}
	for _, p := range k.PatchesStrategicMerge {
		if s := string(p); !strings.Contains(s, "\n") { // a path, not an inline patch
			out = append(out, s)
		}
	}
	for _, r := range k.Replacements {
		out = append(out, r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		out = append(out, generatorPaths(g.GeneratorArgs)...)
	}
	for _, g := range k.SecretGenerator {
		out = append(out, generatorPaths(g.GeneratorArgs)...)
	}
	var local []string
	for _, p := range out {
		if p != "" {
			local = append(local, p)
		}
	}
	return local
}

// generatorPaths lists the files a generator reads: files ("key=path" or "path"), env files.
func generatorPaths(g types.GeneratorArgs) []string {
	var out []string
	for _, f := range g.FileSources {
		if _, p, ok := strings.Cut(f, "="); ok {
			f = p
		}
		out = append(out, f)
	}
	out = append(out, g.EnvSources...)
	if g.EnvSource != "" {
		out = append(out, g.EnvSource)
	}
	return out
}

// remote reports whether a kustomization reference is a URL (a remote base), not a path.
func remote(ref string) bool {
	return strings.Contains(ref, "://") || strings.HasPrefix(ref, "git@") || strings.HasPrefix(ref, "github.com/")
}
