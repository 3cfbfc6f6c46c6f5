/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package install

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// sharedTypes maps the paths where a type is used again to the path that
// documents it, and marks standard Kubernetes types ("") whose fields the
// reference does not repeat.
var sharedTypes = []struct{ prefix, documentedAt string }{
	{"spec.rules[].identity.", "spec.identity."},
	{"spec.overrides[].limits[].", "spec.rules[].limits[]."},
	{"spec.tiers.source.header.", ""},
	{"spec.tiers.source.jwtClaim.", ""},
	{"spec.selector.", ""},
	{"status.conditions[].", ""},
}

// fieldPaths lists every field of schema as spec.rules[].limits[].period.
func fieldPaths(schema apiextensionsv1.JSONSchemaProps, path string) []string {
	var paths []string
	for name, prop := range schema.Properties {
		p := path + "." + name
		if path == "" {
			p = name
		}
		if prop.Type == "array" {
			p += "[]"
			paths = append(paths, p)
			if prop.Items != nil && prop.Items.Schema != nil {
				paths = append(paths, fieldPaths(*prop.Items.Schema, p)...)
			}
			continue
		}
		paths = append(paths, p)
		paths = append(paths, fieldPaths(prop, p)...)
	}
	return paths
}

var _ = Describe("The policy reference", func() {
	It("documents every field of the CRD", func() {
		data, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "sluice.dev_ratelimitpolicies.yaml"))
		Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(yaml.Unmarshal(data, crd)).To(Succeed())
		doc, err := os.ReadFile(filepath.Join(root, "docs", "policy-reference.md"))
		Expect(err).NotTo(HaveOccurred())

		schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		var missing []string
		for _, top := range []string{"spec", "status"} {
			for _, path := range fieldPaths(schema.Properties[top], top) {
				documented := path
				for _, shared := range sharedTypes {
					if strings.HasPrefix(path, shared.prefix) {
						documented = ""
						if shared.documentedAt != "" {
							documented = shared.documentedAt + strings.TrimPrefix(path, shared.prefix)
						}
						break
					}
				}
				if documented != "" && !strings.Contains(string(doc), "`"+documented+"`") {
					missing = append(missing, documented)
				}
			}
		}
		slices.Sort(missing)
		Expect(slices.Compact(missing)).To(BeEmpty(), "docs/policy-reference.md does not describe these fields")
	})
})
