package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// A policy file the API server would refuse does not start the enforcer,
// and every problem is on stderr with its field path.
func TestPolicyFileRefusedListsEveryProblem(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	g.Expect(os.WriteFile(path, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: login}
spec:
  selector: {}
  upstreamPort: 8080
  identity: {sources: [{clientIP: {}}, {header: {name: X-Tenant-ID}}]}
  rules:
    - name: Login_Rule
      algorithm: SlidingWindowLog
      limits: [{requests: 5, period: 1d, burst: 10}]
  overrides: [{tenant: acme, rule: exports, limits: [{requests: 1, period: 500ms}]}]
`), 0o644)).To(Succeed())
	var stderr bytes.Buffer
	status := run(context.Background(), []string{"--upstream", "http://127.0.0.1:1", "--policy-file", path,
		"--listen", freeAddr(t), "--admin-listen", freeAddr(t), "--debug-listen", ""}, env(nil), &bytes.Buffer{}, &stderr)
	g.Expect(status).To(Equal(exitConfig), stderr.String())
	g.Expect(stderr.String()).To(And(
		ContainSubstring(path+` document 1: RateLimitPolicy "login" is invalid:`),
		ContainSubstring(`spec.rules[0].name: Invalid value: "Login_Rule"`),
		ContainSubstring(`spec.rules[0].limits[0].period: Invalid value: "1d": period must be a duration such as 30s, 1m, 1h or 24h; there is no day unit`),
		ContainSubstring(`spec.overrides[0].limits[0].period: Invalid value: "500ms": period must be between 1s and 744h`),
		ContainSubstring(`spec.rules[0]: Invalid value: rule Login_Rule uses SlidingWindowLog, which has no burst`),
		ContainSubstring(`spec.identity: Invalid value: clientIP and shared always find a tenant`),
		ContainSubstring(`spec.overrides: Invalid value: an override names rule exports, which does not exist`),
		ContainSubstring(`spec.selector: Invalid value: selector is empty`),
	))
}
