package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/watcher"
)

func TestUndiscovered(t *testing.T) {
	metrics := schema.GroupVersionResource{Group: "metrics.example.com", Version: "v1beta1", Resource: "podmetrics"}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	claim := func(gvr schema.GroupVersionResource) watcher.Claim {
		return watcher.Claim{Resource: watcher.Resource{GVR: gvr}}
	}
	down := map[schema.GroupVersion]error{metrics.GroupVersion(): errors.New("the server is currently unable to handle the request")}
	tests := []struct {
		name       string
		registered []watcher.Claim
		failed     map[schema.GroupVersion]error
		keep       bool
	}{
		{"keeps a rule whose registered resource's API could not be discovered", []watcher.Claim{claim(configMaps), claim(metrics)}, down, true},
		{"updates a rule none of whose registered resources is affected", []watcher.Claim{claim(configMaps)}, down, false},
		{"updates a rule not registered yet: nothing to keep", nil, down, false},
		{"updates every rule when discovery succeeded", []watcher.Claim{claim(metrics)}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, keep := undiscovered(tt.registered, tt.failed)
			assert.Equal(t, tt.keep, keep)
			if keep {
				assert.Contains(t, msg, "metrics.example.com/v1beta1")
				assert.Contains(t, msg, "unable to handle the request")
			}
		})
	}
}
