package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/watcher"
)

func TestKeepUndiscovered(t *testing.T) {
	metrics := schema.GroupVersionResource{Group: "metrics.example.com", Version: "v1beta1", Resource: "podmetrics"}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	claim := func(gvr schema.GroupVersionResource) watcher.Claim {
		return watcher.Claim{Resource: watcher.Resource{GVR: gvr}}
	}
	rule := func(groups, resources []string) []v1alpha1.ResourceRule {
		return []v1alpha1.ResourceRule{{APIGroups: groups, Resources: resources}}
	}
	down := map[schema.GroupVersion]error{metrics.GroupVersion(): errors.New("the server is currently unable to handle the request")}
	gvrs := func(cs []watcher.Claim) []string {
		out := []string{}
		for _, c := range cs {
			out = append(out, c.Resource.GVR.Resource)
		}
		return out
	}
	tests := []struct {
		name       string
		compiled   []watcher.Claim
		registered []watcher.Claim
		failed     map[schema.GroupVersion]error
		rules      []v1alpha1.ResourceRule
		want       []string
		kept       bool
	}{
		{"keeps a registered resource whose API could not be discovered",
			[]watcher.Claim{claim(configMaps)}, []watcher.Claim{claim(configMaps), claim(metrics)}, down,
			rule([]string{"", "metrics.example.com"}, []string{"configmaps", "podmetrics"}), []string{"configmaps", "podmetrics"}, true},
		{"keeps it for a rule that names every resource of every group",
			[]watcher.Claim{claim(configMaps)}, []watcher.Claim{claim(metrics)}, down,
			rule([]string{"*"}, []string{"*"}), []string{"configmaps", "podmetrics"}, true},
		{"applies an edit to the rest of the rule meanwhile",
			[]watcher.Claim{claim(configMaps), claim(secrets)}, []watcher.Claim{claim(configMaps), claim(metrics)}, down,
			rule([]string{"*"}, []string{"*"}), []string{"configmaps", "secrets", "podmetrics"}, true},
		{"drops a resource the edited rule no longer names, reachable or not",
			[]watcher.Claim{claim(configMaps)}, []watcher.Claim{claim(configMaps), claim(metrics)}, down,
			rule([]string{""}, []string{"configmaps"}), []string{"configmaps"}, false},
		{"keeps nothing when discovery succeeded",
			[]watcher.Claim{claim(configMaps)}, []watcher.Claim{claim(metrics)}, nil,
			rule([]string{"*"}, []string{"*"}), []string{"configmaps"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := keepUndiscovered(tt.compiled, tt.registered, tt.failed, tt.rules)
			assert.Equal(t, tt.want, gvrs(got))
			assert.Equal(t, tt.kept, msg != "")
			if tt.kept {
				assert.Contains(t, msg, "metrics.example.com/v1beta1")
				assert.Contains(t, msg, "unable to handle the request")
			}
		})
	}
}
