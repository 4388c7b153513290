package watcher

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestNoiseSkip(t *testing.T) {
	cms := schema.GroupResource{Resource: "configmaps"}
	secrets := schema.GroupResource{Resource: "secrets"}
	rs := schema.GroupResource{Group: "apps", Resource: "replicasets"}
	controller := []metav1.OwnerReference{{Kind: "Deployment", Name: "api", Controller: ptr.To(true)}}
	plainOwner := []metav1.OwnerReference{{Kind: "ConfigMap", Name: "x"}}
	cases := []struct {
		name  string
		noise Noise
		facts ObjectFacts
		want  bool
	}{
		{"skips kube-root-ca.crt by default", Noise{}, ObjectFacts{Resource: cms, Name: "kube-root-ca.crt"}, true},
		{"captures kube-root-ca.crt when asked", Noise{CaptureKubeRootCA: true}, ObjectFacts{Resource: cms, Name: "kube-root-ca.crt"}, false},
		{"captures an ordinary ConfigMap", Noise{}, ObjectFacts{Resource: cms, Name: "app"}, false},
		{"skips service-account token Secrets by default", Noise{}, ObjectFacts{Resource: secrets, Name: "t", SecretType: "kubernetes.io/service-account-token"}, true},
		{"captures opaque Secrets", Noise{}, ObjectFacts{Resource: secrets, Name: "db", SecretType: "Opaque"}, false},
		{"skips a ReplicaSet its Deployment controls", Noise{}, ObjectFacts{Resource: rs, Name: "api-1", Owners: controller}, true},
		{"captures owned objects when asked", Noise{CaptureOwned: true}, ObjectFacts{Resource: rs, Name: "api-1", Owners: controller}, false},
		{"captures an object whose owner is not its controller", Noise{}, ObjectFacts{Resource: cms, Name: "app", Owners: plainOwner}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := tc.noise.Skip(tc.facts)
			assert.Equal(t, tc.want, got)
		})
	}
}
