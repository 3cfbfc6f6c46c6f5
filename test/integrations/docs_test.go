// Package integrations checks the configurations the rate limit service's
// integration pages (docs/integrations) give users to paste: each fenced
// YAML block is preceded by a marker naming what it is, and is decoded
// into that type and validated as Envoy (or the service) would.
package integrations

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
)

// The kinds of block a marker names besides an Envoy type's full name.
const (
	kindEnvoyFilter = "istio.networking.v1alpha3.EnvoyFilter"
	kindERL         = "envoyproxy/ratelimit"
	kindKubernetes  = "kubernetes"
)

var (
	docsDir = filepath.Join("..", "..", "docs")
	marker  = regexp.MustCompile(`^<!-- validate: (\S+) -->$`)
)

// block is one fenced YAML block of a page.
type block struct {
	page string
	line int
	// kind is what its marker names; "" when it has none.
	kind string
	text string
}

func (b block) String() string { return fmt.Sprintf("%s:%d (%s)", b.page, b.line, b.kind) }

// pages are the pages whose configuration blocks are checked.
func pages(t *testing.T) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(docsDir, "integrations", "*.md"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	found = append(found, filepath.Join(docsDir, "ratelimit-service.md"), filepath.Join(docsDir, "ratelimit-migration.md"))
	return found
}

// blocks reads the fenced YAML blocks of page, each with the marker on the
// line before its fence.
func blocks(t *testing.T, page string) []block {
	t.Helper()
	data, err := os.ReadFile(page)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var out []block
	var cur *block
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case strings.TrimSpace(line) == "```yaml":
			cur = &block{page: filepath.Base(page), line: n}
			if m := marker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.kind = m[1]
			}
		}
		prev = line
	}
	NewWithT(t).Expect(cur).To(BeNil(), "%s: a fenced block is not closed", page)
	return out
}

// Every YAML block of the pages says what it is, so none goes unchecked.
func TestEveryConfigurationBlockIsMarked(t *testing.T) {
	for _, page := range pages(t) {
		for _, b := range blocks(t, page) {
			if b.kind == "" {
				t.Errorf("%s: a yaml block without a <!-- validate: TYPE --> line before it", b)
			}
		}
	}
}

// The configurations users paste decode into their types without an
// unknown field and pass their validation.
func TestTheConfigurationsOfThePagesAreValid(t *testing.T) {
	counts := map[string]map[string]int{}
	for _, page := range pages(t) {
		for _, b := range blocks(t, page) {
			if counts[b.page] == nil {
				counts[b.page] = map[string]int{}
			}
			counts[b.page][b.kind]++
			t.Run(fmt.Sprintf("%s:%d", b.page, b.line), func(t *testing.T) {
				NewWithT(t).Expect(check(b)).To(Succeed(), "%s:\n%s", b, b.text)
			})
		}
	}
	// What each page must keep: a page losing its configuration fails here.
	g := NewWithT(t)
	g.Expect(counts["envoy.md"]).To(HaveKeyWithValue("envoy.config.bootstrap.v3.Bootstrap", 1))
	g.Expect(counts["envoy.md"]).To(HaveKeyWithValue("envoy.config.cluster.v3.Cluster", 1))
	g.Expect(counts["istio.md"]).To(HaveKeyWithValue(kindEnvoyFilter, 2))
	g.Expect(counts["contour.md"][kindKubernetes]).To(BeNumerically(">=", 2))
	g.Expect(counts["emissary.md"][kindKubernetes]).To(BeNumerically(">=", 2))
	g.Expect(counts["ratelimit-migration.md"][kindERL]).To(BeNumerically(">=", 1))
}

// check decodes and validates one block as its marker says.
func check(b block) error {
	switch b.kind {
	case kindEnvoyFilter:
		return checkEnvoyFilter(b.text)
	case kindERL:
		f, err := erlconfig.Parse(b.page, []byte(b.text))
		if err != nil {
			return err
		}
		_, err = erlconfig.Compile([]*erlconfig.File{f}, erlconfig.Options{})
		return err
	case kindKubernetes:
		return checkObjects(b.text)
	default:
		msg, err := newEnvoyMessage(b.kind)
		if err != nil {
			return err
		}
		return decodeAndValidate(b.text, msg)
	}
}

// checkObjects parses Kubernetes objects: each needs apiVersion, kind and
// a name. Their schemas (Contour's, Emissary's) are not in this module.
func checkObjects(text string) error {
	for i, doc := range strings.Split(text, "\n---\n") {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata.Name == "" {
			return fmt.Errorf("document %d: apiVersion, kind and metadata.name are required", i)
		}
	}
	return nil
}

// checkEnvoyFilter decodes each patch value of an EnvoyFilter as the Envoy
// type its applyTo names.
func checkEnvoyFilter(text string) error {
	var ef struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			ConfigPatches []struct {
				ApplyTo string `json:"applyTo"`
				Patch   struct {
					Operation string         `json:"operation"`
					Value     map[string]any `json:"value"`
				} `json:"patch"`
			} `json:"configPatches"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(text), &ef); err != nil {
		return err
	}
	if ef.APIVersion != "networking.istio.io/v1alpha3" || ef.Kind != "EnvoyFilter" {
		return fmt.Errorf("apiVersion %q kind %q: want networking.istio.io/v1alpha3 EnvoyFilter", ef.APIVersion, ef.Kind)
	}
	if len(ef.Spec.ConfigPatches) == 0 {
		return fmt.Errorf("no configPatches")
	}
	for i, p := range ef.Spec.ConfigPatches {
		value, err := yaml.Marshal(p.Patch.Value)
		if err != nil {
			return err
		}
		if err := checkPatch(p.ApplyTo, p.Patch.Operation, string(value)); err != nil {
			return fmt.Errorf("configPatches[%d] (%s): %w", i, p.ApplyTo, err)
		}
	}
	return nil
}

func checkPatch(applyTo, operation, value string) error {
	switch applyTo {
	case "HTTP_FILTER":
		msg, _ := newEnvoyMessage("envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter")
		return decodeAndValidate(value, msg)
	case "CLUSTER":
		msg, _ := newEnvoyMessage("envoy.config.cluster.v3.Cluster")
		return decodeAndValidate(value, msg)
	case "VIRTUAL_HOST", "HTTP_ROUTE":
		// A MERGE value is part of a virtual host or route: decoded whole
		// (no unknown field), then its rate_limits validated.
		if operation != "MERGE" {
			return fmt.Errorf("operation %s: only MERGE is checked", operation)
		}
		return checkRateLimits(applyTo, value)
	}
	return fmt.Errorf("applyTo %s is not checked: add it to checkPatch", applyTo)
}

// TestTheChecksRefuseABrokenConfiguration holds the checks themselves: an
// unknown field, a value out of range, and an unknown typed_config fail.
func TestTheChecksRefuseABrokenConfiguration(t *testing.T) {
	var bootstrap block
	for _, b := range blocks(t, filepath.Join(docsDir, "integrations", "envoy.md")) {
		if b.kind == "envoy.config.bootstrap.v3.Bootstrap" {
			bootstrap = b
		}
	}
	g := NewWithT(t)
	g.Expect(bootstrap.text).NotTo(BeEmpty())
	g.Expect(check(bootstrap)).To(Succeed())
	for _, tc := range []struct{ from, to, wantErr string }{
		{"failure_mode_deny: false", "failure_mode_denied: false", "unknown field"},
		{"domain: gateway", `domain: ""`, "Domain"},
		{"envoy.extensions.filters.http.ratelimit.v3.RateLimit", "envoy.extensions.filters.http.ratelimit.v3.RateLimits", "RateLimits"},
		{"cluster_name: sluice-ratelimit}", "cluster_name: \"\"}", "ClusterName"},
	} {
		broken := bootstrap
		g.Expect(broken.text).To(ContainSubstring(tc.from))
		broken.text = strings.Replace(broken.text, tc.from, tc.to, 1)
		g.Expect(check(broken)).To(MatchError(ContainSubstring(tc.wantErr)), "%s -> %s", tc.from, tc.to)
	}

	var filter block
	for _, b := range blocks(t, filepath.Join(docsDir, "integrations", "istio.md")) {
		if b.kind == kindEnvoyFilter && filter.text == "" {
			filter = b
		}
	}
	g.Expect(check(filter)).To(Succeed())
	for _, tc := range []struct{ from, to, wantErr string }{
		{"transport_api_version: V3", "transport_api_version: V4", "transportApiVersion"},
		{"type: STRICT_DNS", "type: STRICTER_DNS", "type"},
		{"descriptor_key: api_key", "descriptor: api_key", "unknown field"},
	} {
		broken := filter
		g.Expect(broken.text).To(ContainSubstring(tc.from))
		broken.text = strings.Replace(broken.text, tc.from, tc.to, 1)
		g.Expect(check(broken)).To(MatchError(ContainSubstring(tc.wantErr)), "%s -> %s", tc.from, tc.to)
	}
}

// The example file of config/ratelimit is the one the service's page shows
// and the integration pages send descriptors for.
func TestTheExampleFileIsTheDocumentedOne(t *testing.T) {
	g := NewWithT(t)
	file, err := os.ReadFile(filepath.Join("..", "..", "config", "ratelimit", "config", "gateway.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var shown []string
	for _, b := range blocks(t, filepath.Join(docsDir, "ratelimit-service.md")) {
		if b.kind == kindERL {
			shown = append(shown, b.text)
		}
	}
	g.Expect(shown).To(ContainElement(string(file)), "docs/ratelimit-service.md does not show config/ratelimit/config/gateway.yaml as it is")
}
