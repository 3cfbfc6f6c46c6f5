package reload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// LoadPolicies reads RateLimitPolicy YAML documents from paths (several
// documents per file, separated by "---"), applies the API's defaults as the
// API server would, and checks that they all belong to one namespace: the
// namespace of the first policy that names one, else defaultNamespace, else
// "default".
func LoadPolicies(defaultNamespace string, paths ...string) (string, []v1alpha1.RateLimitPolicy, error) {
	var policies []v1alpha1.RateLimitPolicy
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", nil, fmt.Errorf("load policies: %w", err)
		}
		ps, err := ParsePolicies(data)
		if err != nil {
			return "", nil, fmt.Errorf("load policies %s: %w", path, err)
		}
		policies = append(policies, ps...)
	}
	if len(policies) == 0 {
		return "", nil, fmt.Errorf("load policies: no RateLimitPolicy in %v", paths)
	}
	namespace := defaultNamespace
	for _, p := range policies {
		if p.Namespace != "" {
			namespace = p.Namespace
			break
		}
	}
	if namespace == "" {
		namespace = "default"
	}
	seen := map[string]bool{}
	for i := range policies {
		p := &policies[i]
		if p.Namespace == "" {
			p.Namespace = namespace
		}
		if p.Namespace != namespace {
			return "", nil, fmt.Errorf("load policies: policy %s/%s is not in namespace %s: one enforcer applies the policies of one namespace", p.Namespace, p.Name, namespace)
		}
		if seen[p.Name] {
			return "", nil, fmt.Errorf("load policies: policy %q is defined twice", p.Name)
		}
		seen[p.Name] = true
		// Outside a cluster nothing assigns these; the compiled config and
		// /status still name them.
		if p.UID == "" {
			p.UID = types.UID("file:" + namespace + "/" + p.Name)
		}
		if p.Generation == 0 {
			p.Generation = 1
		}
	}
	return namespace, policies, nil
}

// ParsePolicies decodes every YAML document of data as a RateLimitPolicy,
// with defaults applied. Unknown fields are errors, as in the API server,
// so a typo cannot silently drop a limit; empty documents are skipped.
func ParsePolicies(data []byte) ([]v1alpha1.RateLimitPolicy, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var policies []v1alpha1.RateLimitPolicy
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return policies, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var p v1alpha1.RateLimitPolicy
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		gv := v1alpha1.GroupVersion.String()
		if p.APIVersion != gv || p.Kind != "RateLimitPolicy" {
			return nil, fmt.Errorf("document %d: want apiVersion %s and kind RateLimitPolicy, got %q %q", n, gv, p.APIVersion, p.Kind)
		}
		if p.Name == "" {
			return nil, fmt.Errorf("document %d: metadata.name is required", n)
		}
		p.ApplyDefaults()
		policies = append(policies, p)
	}
}

// stripComments drops comment lines, so a document holding only comments
// counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}
