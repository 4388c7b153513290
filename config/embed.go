// Package config holds the generated Kubernetes manifests (CRDs, RBAC) and embeds the CRDs
// so the `dev` sandbox and tests install exactly what controller-gen produced.
package config

import (
	"embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// CRDs are the CustomResourceDefinitions under crd/bases.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS

// CRDDir is the directory inside CRDs holding the files.
const CRDDir = "crd/bases"

// LoadCRDs decodes the embedded CRDs, for installing them into a control plane.
func LoadCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := CRDs.ReadDir(CRDDir)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		data, err := CRDs.ReadFile(CRDDir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}
