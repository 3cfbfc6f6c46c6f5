// Package layers_test holds the import rules of docs/architecture.md as
// allow-lists: every package of the module belongs to one layer, and a layer
// names the project packages it may import. A new package that no layer
// names fails here, so it cannot slip past a rule written before it.
package layers_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluice-dev/sluice/"

// A layer is a set of packages (path patterns relative to the module, "x/..."
// for x and everything under it) and the project packages they may import.
// Tests may import what their package may, and the test harnesses.
type layer struct {
	name     string
	packages []string
	may      []string
}

// testsMay are what a layer's tests may import besides: a program to test
// against, say.
var testsMay = map[string][]string{
	// the status client is tested against a real admin listener
	"controllers": {"enforcer/admin", "enforcer/engine", "enforcer/metrics", "enforcer/reload"},
	// its output is read back as the enforcer reads it
	"sluice-policy-compile": {"enforcer/config"},
	// the admin listener is tested beside a real proxy
	"admin": {"enforcer/proxy"},
}

// Leaves import no project package.
var leaves = []string{"api/v1alpha1", "enforcer/config", "enforcer/status", "enforcer/ratelimitheaders",
	"enforcer/topk", "enforcer/request", "internal/wellknown", "internal/buildinfo", "internal/listenhint",
	"internal/example/...", "config/crd", "build/..."}

// dataPlane is what a deciding program is built from; it never imports the
// API types, the controllers or the compiler.
var dataPlane = []string{"enforcer/config", "enforcer/request", "enforcer/identity", "enforcer/limiter/...",
	"enforcer/rules", "enforcer/engine", "enforcer/status", "enforcer/topk", "enforcer/ratelimitheaders",
	"enforcer/debugapi"}

var layers = []layer{
	{"leaves", leaves, nil},
	{"admin documents", []string{"enforcer/debugapi"}, []string{"enforcer/config"}},
	{"limiter", []string{"enforcer/limiter/..."}, []string{"enforcer/config", "enforcer/limiter/..."}},
	{"identity", []string{"enforcer/identity"}, []string{"enforcer/config", "enforcer/request"}},
	{"rules", []string{"enforcer/rules"}, []string{"enforcer/config", "enforcer/identity", "enforcer/limiter/...", "enforcer/request"}},
	{"engine", []string{"enforcer/engine"}, []string{"enforcer/config", "enforcer/limiter/...", "enforcer/rules"}},
	{"adaptive", []string{"enforcer/adaptive"}, []string{"enforcer/config", "enforcer/engine", "enforcer/limiter/...", "enforcer/rules"}},
	{"overload", []string{"enforcer/overload"}, []string{"enforcer/limiter/..."}},
	{"reload", []string{"enforcer/reload"}, []string{"enforcer/config"}},
	// The transport forwards a decided request; it knows no rule or limit.
	{"transport", []string{"enforcer/transport"}, []string{"enforcer/config", "enforcer/request"}},
	{"proxy", []string{"enforcer/proxy"}, append(slices.Clone(dataPlane), "enforcer/overload", "enforcer/transport")},
	// The rate limit service decides from descriptors: it links no proxy.
	{"rate limit service", []string{"enforcer/rls/..."}, append(slices.Clone(dataPlane), "enforcer/rls/...")},
	{"metrics", []string{"enforcer/metrics"}, append(slices.Clone(dataPlane), "enforcer/adaptive", "enforcer/overload")},
	// admin reports on the wiring; cmd/enforcer hands it the proxy's views.
	{"admin", []string{"enforcer/admin"}, append(slices.Clone(dataPlane), "enforcer/adaptive", "enforcer/metrics",
		"enforcer/overload", "enforcer/reload")},
	{"compiler", []string{"internal/compile"}, []string{"api/v1alpha1", "enforcer/config"}},
	{"policy files", []string{"internal/policyfile"}, []string{"api/v1alpha1", "config/crd"}},
	{"injection", []string{"internal/inject"}, []string{"api/v1alpha1", "internal/compile", "internal/wellknown"}},
	// The client of an enforcer's PUT /config: the pusher's, and a fleet's in tests.
	{"push client", []string{"internal/configpush"}, []string{"enforcer/status"}},
	{"controllers", []string{"controllers/..."}, []string{"api/v1alpha1", "controllers/conditions", "controllers/watch",
		"enforcer/config", "enforcer/status", "enforcer/topk", "internal/compile", "internal/configpush", "internal/inject",
		"internal/wellknown"}},
	{"controllers' wiring", []string{"controllers"}, []string{"api/v1alpha1", "controllers/...", "internal/configpush",
		"internal/inject", "internal/wellknown"}},
	// kubectl-sluice reads the API, compiles to simulate, matches rules and
	// asks enforcers over their admin port: no proxy, no Redis client.
	{"kubectl plugin", []string{"internal/kubectlplugin", "cmd/kubectl-sluice"}, []string{"api/v1alpha1", "enforcer/config",
		"enforcer/debugapi", "enforcer/rules", "enforcer/status", "enforcer/topk", "internal/compile", "internal/inject",
		"internal/kubectlplugin", "internal/policyfile", "internal/wellknown"}},
	{"sluice-enforcer", []string{"cmd/enforcer"}, []string{"enforcer/adaptive", "enforcer/admin", "enforcer/config",
		"enforcer/engine", "enforcer/limiter/...", "enforcer/metrics", "enforcer/overload", "enforcer/proxy", "enforcer/reload",
		"enforcer/status", "enforcer/transport", "internal/buildinfo", "internal/listenhint", "internal/program"}},
	{"sluice-ratelimit", []string{"cmd/ratelimit"}, []string{"enforcer/admin", "enforcer/config", "enforcer/debugapi",
		"enforcer/engine", "enforcer/limiter/...", "enforcer/metrics", "enforcer/reload", "enforcer/rls/...", "enforcer/rules",
		"enforcer/status", "internal/buildinfo", "internal/listenhint", "internal/program"}},
	{"sluice-manager", []string{"cmd/manager"}, []string{"api/v1alpha1", "controllers/...", "internal/buildinfo",
		"internal/inject", "internal/listenhint", "internal/wellknown"}},
	{"sluice-policy-compile", []string{"cmd/policy-compile"}, []string{"internal/buildinfo", "internal/compile", "internal/policyfile"}},
	{"sluice-load", []string{"cmd/sluice-load"}, []string{"internal/example/..."}},
	{"program skeleton", []string{"internal/program"}, nil},
	// Tools, demos and suites may use anything; no program links them.
	{"tools and suites", []string{"hack/...", "test/...", "internal/testing/..."}, []string{"..."}},
}

// linksNo are packages a program must not link, even indirectly.
var linksNo = map[string][]string{
	// The manager runs beside no Redis: a client would cost memory and
	// widen what it can reach.
	"cmd/manager": {"github.com/redis/go-redis/v9"},
	// kubectl-sluice still links the Redis client through enforcer/rules ->
	// enforcer/limiter (the simulator matches rules and builds their
	// requests); it drops off this list once the limiter's request types are
	// a package of their own.
	"cmd/kubectl-sluice": {module + "enforcer/proxy", module + "enforcer/transport"},
	"cmd/policy-compile": {"github.com/redis/go-redis/v9"},
	// The sidecar links no compiler and no Kubernetes library: their
	// initialisation costs memory in every pod (docs/design/0013-enforcer-memory.md).
	"cmd/enforcer":  {module + "internal/compile", module + "internal/policyfile", module + "api/v1alpha1", "k8s.io"},
	"cmd/ratelimit": {module + "internal/compile", module + "api/v1alpha1", module + "enforcer/proxy"},
}

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", "-tags", "node,scale"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func matches(pattern, rel string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return pattern == rel
}

func matchesAny(patterns []string, rel string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, rel) })
}

// layerOf is the layer naming rel; a package named by an exact path belongs
// to that layer before one of a pattern.
func layerOf(rel string) *layer {
	var byPattern *layer
	for i := range layers {
		l := &layers[i]
		if slices.Contains(l.packages, rel) {
			return l
		}
		if byPattern == nil && matchesAny(l.packages, rel) {
			byPattern = l
		}
	}
	return byPattern
}

func TestEveryPackageImportsOnlyWhatItsLayerAllows(t *testing.T) {
	for _, p := range list(t, "./...") {
		rel := strings.TrimPrefix(p.ImportPath, module)
		l := layerOf(rel)
		if l == nil {
			t.Errorf("%s belongs to no layer: add it to one in %s (docs/architecture.md says which)", rel, "test/layers")
			continue
		}
		check := func(imports []string, forTests bool) {
			for _, imp := range imports {
				dep, ok := strings.CutPrefix(imp, module)
				if !ok || dep == rel || matchesAny(l.may, dep) {
					continue
				}
				if forTests && (strings.HasPrefix(dep, "internal/testing/") || matchesAny(testsMay[l.name], dep)) {
					continue
				}
				what := "imports"
				if forTests {
					what = "tests import"
				}
				t.Errorf("%s (%s) %s %s, which its layer does not allow", rel, l.name, what, dep)
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
}

func TestProgramsLinkOnlyWhatTheyNeed(t *testing.T) {
	for _, p := range list(t, "-deps=false", "./cmd/...") {
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, banned := range linksNo[rel] {
			for _, d := range p.Deps {
				if d == banned || strings.HasPrefix(d, banned+"/") {
					t.Errorf("%s links %s (through %s), which it must not", rel, banned, d)
					break
				}
			}
		}
	}
}
