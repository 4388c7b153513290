package layout

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKustomizeOutside(t *testing.T) {
	kustomization := func(p, content string) []KustomizeFile {
		return []KustomizeFile{{Path: p, KustomizeRefs: ParseKustomization([]byte(content))}}
	}
	cases := []struct {
		name   string
		files  []KustomizeFile
		reason string // "" when supported
	}{
		{"supports a folder with no Kustomize file above it", nil, ""},
		{"supports a Kustomize file above that refers only to other folders",
			kustomization("live/kustomization.yaml", "resources:\n- team-b/app.yaml\n- ../base\n- https://github.com/org/repo//base?ref=v1\n"), ""},
		{"supports a namespace that happens to be named like the folder",
			kustomization("live/kustomization.yaml", "namespace: team-a\nresources:\n- other.yaml\n"), ""},
		{"refuses a Kustomize file above that lists a file of the folder",
			kustomization("live/kustomization.yaml", "resources:\n- team-a/app.yaml\n"), fmt.Sprintf(ReasonListedAbove, "team-a/app.yaml")},
		{"refuses one that lists the folder itself",
			kustomization("kustomization.yaml", "resources:\n- ./live/team-a\n"), fmt.Sprintf(ReasonListedAbove, "./live/team-a")},
		{"refuses a patch read from the folder",
			kustomization("live/kustomization.yaml", "patches:\n- path: team-a/patch.yaml\n"), fmt.Sprintf(ReasonListedAbove, "team-a/patch.yaml")},
		{"refuses a generator input in the folder, key=path form included",
			kustomization("live/kustomization.yaml", "configMapGenerator:\n- name: c\n  files:\n  - conf=team-a/app.conf\n"), fmt.Sprintf(ReasonListedAbove, "team-a/app.conf")},
		{"refuses a Kustomize file above that does not parse, which cannot be told apart",
			kustomization("live/kustomization.yaml", "resources: [\n"), "does not parse"},
		{"refuses a Kustomize file beside the folder that lists one of its files through ../",
			kustomization("overlays/prod/kustomization.yaml", "resources:\n- ../../live/team-a/app.yaml\n"),
			fmt.Sprintf(ReasonListedElsewhere, "../../live/team-a/app.yaml")},
		{"refuses one elsewhere that takes a patch from the folder",
			kustomization("overlays/prod/Kustomization", "patches:\n- path: ../../live/team-a/patch.yaml\n"),
			fmt.Sprintf(ReasonListedElsewhere, "../../live/team-a/patch.yaml")},
		{"supports one elsewhere that refers to a sibling of the folder whose name starts like it",
			kustomization("overlays/prod/kustomization.yaml", "resources:\n- ../../live/team-ab/app.yaml\n- ../../live/other.yaml\n"), ""},
		{"supports one elsewhere whose ../ climbs above the repository root",
			kustomization("overlays/kustomization.yaml", "resources:\n- ../../live/team-a/app.yaml\n"), ""},
		{"refuses a Helm values file read from the folder",
			kustomization("overlays/prod/kustomization.yaml", "helmCharts:\n- name: app\n  valuesFile: ../../live/team-a/values.yaml\n"),
			fmt.Sprintf(ReasonListedElsewhere, "../../live/team-a/values.yaml")},
		{"refuses a deprecated Helm inflation generator whose chart home is in the folder",
			kustomization("overlays/prod/kustomization.yaml", "helmChartInflationGenerator:\n- chartName: app\n  chartHome: ../../live/team-a/charts\n"),
			fmt.Sprintf(ReasonListedElsewhere, "../../live/team-a/charts")},
		{"refuses an OpenAPI schema read from the folder",
			kustomization("overlays/prod/kustomization.yaml", "openapi:\n  path: ../../live/team-a/schema.json\n"),
			fmt.Sprintf(ReasonListedElsewhere, "../../live/team-a/schema.json")},
		{"refuses a deprecated base in the folder",
			kustomization("overlays/prod/kustomization.yaml", "bases:\n- ../../live/team-a\n"),
			fmt.Sprintf(ReasonListedElsewhere, "../../live/team-a")},
		{"passes over one elsewhere that does not parse: its build is broken whatever the writer does",
			kustomization("overlays/prod/kustomization.yaml", "resources: [\n"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := KustomizeOutside("live/team-a", tc.files)
			if tc.reason == "" {
				assert.True(t, v.Supported, v.Message())
				return
			}
			assert.False(t, v.Supported)
			assert.Contains(t, v.Reason, tc.reason)
			assert.Equal(t, tc.files[0].Path, v.File, "names the Kustomize file")
		})
	}
}

func TestParseKustomizationRefusesWithoutQuotingTheFilesValues(t *testing.T) {
	refs := ParseKustomization([]byte("secretGenerator:\n- name: db\n  literals:\n  - !!int password=TOPSECRET\n"))
	require.Error(t, refs.Err)
	assert.NotContains(t, refs.Err.Error(), "TOPSECRET", "the reason reaches admission answers")
	verdict := KustomizeOutside("live", []KustomizeFile{{Path: "kustomization.yaml", KustomizeRefs: refs}})
	assert.False(t, verdict.Supported)
	assert.NotContains(t, verdict.Reason, "TOPSECRET")
}

func TestParseKustomizationRefusesAComplexKeyWithoutQuotingIt(t *testing.T) {
	refs := ParseKustomization([]byte("? [password=TOPSECRET]\n: x\n"))
	require.Error(t, refs.Err)
	assert.NotContains(t, refs.Err.Error(), "TOPSECRET", "the reason reaches admission answers")
}
