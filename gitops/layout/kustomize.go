package layout

import (
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
	"github.com/gitops-reverser/gitops-reverser/gitops/plan"
)

// Reasons for Kustomize files outside the folder that refer into it.
const (
	ReasonListedAbove = "is a Kustomize file above the folder that refers to %s inside it " +
		"(Kustomize layouts are not supported yet: a file the writer adds would not be listed there, " +
		"one it removes would break the build)"
	ReasonListedElsewhere = "is a Kustomize file outside the folder that refers to %s inside it " +
		"(a file the writer removes or renames would break its build)"
	reasonUnparseableAbove = "is a Kustomize file above the folder that does not parse, " +
		"so whether it refers to files of the folder cannot be told: %s"
)

// KustomizationNames are the file names Kustomize reads as a kustomization, for finding
// every Kustomize file of a repository (KustomizeOutside judges them).
func KustomizationNames() []string {
	return []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}
}

// KustomizeRefs is what one Kustomize file refers to: its local paths as written, or why it
// does not parse. It depends only on the file's content, so a caller may keep it by blob.
type KustomizeRefs struct {
	Paths []string
	Err   error
}

// ParseKustomization reads a Kustomize file's content with kustomize's own types.
func ParseKustomization(content []byte) KustomizeRefs {
	var k types.Kustomization
	if err := sigsyaml.Unmarshal(content, &k); err != nil {
		return KustomizeRefs{Err: manifest.HideValues(err)} // its reason reaches admission answers
	}
	k.FixKustomization() // deprecated fields into the current ones, as kustomize reads them
	var local []string
	for _, ref := range kustomizationPaths(&k) {
		if !remote(ref) {
			local = append(local, ref)
		}
	}
	return KustomizeRefs{Paths: local}
}

// KustomizeFile is a Kustomize file of the repository (Path) with what it refers to.
type KustomizeFile struct {
	Path string
	KustomizeRefs
}

// KustomizeOutside judges the Kustomize files of the repository outside folder: one that
// refers to a path inside the folder (a resource, component, patch, generator or Helm
// values input, …), whether from a directory above it or through "../" from elsewhere,
// makes the folder unsupported, since the writer would add files it does not list and
// remove or rename files it lists. One that only refers elsewhere is fine. One above the
// folder that does not parse is refused, since it cannot be told apart and its build takes
// in the folder's directory; one elsewhere that does not parse is already broken whatever
// the writer does, so it is passed over rather than stalling every folder of the
// repository. Pure.
func KustomizeOutside(folder string, files []KustomizeFile) Verdict {
	clean := path.Clean(folder)
	for _, f := range files {
		dir := path.Dir(f.Path)
		above := dir == "." || plan.Within(dir, clean)
		if f.Err != nil {
			if above {
				return Verdict{Reason: fmt.Sprintf(reasonUnparseableAbove, f.Err), Fix: "fix it so it parses", File: f.Path, Folder: folder}
			}
			continue
		}
		for _, ref := range f.Paths {
			target := path.Clean(path.Join(dir, ref))
			if target == clean || plan.Within(clean, target) {
				reason := ReasonListedElsewhere
				if above {
					reason = ReasonListedAbove
				}
				return Verdict{Reason: fmt.Sprintf(reason, ref), Fix: fixListed, File: f.Path, Folder: folder}
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
	for _, h := range k.HelmCharts {
		out = append(out, h.ValuesFile)
		out = append(out, h.AdditionalValuesFiles...)
	}
	if k.HelmGlobals != nil {
		out = append(out, k.HelmGlobals.ChartHome)
	}
	out = append(out, k.OpenAPI["path"])
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
