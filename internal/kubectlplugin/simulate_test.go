package kubectlplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSimulateNeedsNoCluster(t *testing.T) {
	g := NewWithT(t)
	files := []string{"testdata/shop-policy.yaml"}
	r, err := Simulate(context.Background(), nil, "shop", SimulateRequest{Files: files, Tenant: "acme", Method: "GET", Path: "/v1/items"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Namespace).To(Equal("shop"))
	g.Expect(r.Rules).To(HaveLen(1))
	g.Expect(r.Rules[0].Rule).To(Equal("reads"))
	g.Expect(r.Rules[0].Windows).To(Equal([]SimulatedWindow{{Requests: 5, PeriodSeconds: 60}}))
	g.Expect(r.Rules[0].Sources).To(Equal([]string{"header X-Tenant-ID"}))
	g.Expect(r.Rules[0].TenantHash).To(MatchRegexp(`^[0-9a-f]{24}$`))
	g.Expect(r.Rules[0].Keys).To(BeEmpty(), "keys only with --from-cluster")

	r, err = Simulate(context.Background(), nil, "shop", SimulateRequest{Files: files, Tenant: "acme", Method: "GET", Path: "/v1/exports/7"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Rules).To(HaveLen(2), "reads and the monthly exports quota")
	g.Expect(r.Rules[1].Rule).To(Equal("exports"))
	g.Expect(r.Rules[1].Limits).To(Equal([]string{"1000 per month (Europe/Berlin)"}))
	g.Expect(r.Rules[1].Windows).To(Equal([]SimulatedWindow{{Requests: 1000, Calendar: "month (Europe/Berlin)"}}))
	g.Expect(r.Rules[0].Limits).To(Equal([]string{"5 per 1m"}))

	r, err = Simulate(context.Background(), nil, "shop", SimulateRequest{Files: files, Tenant: "acme", Method: "GET", Path: "/healthz"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Rules).To(BeEmpty())
	g.Expect(r.ExemptBy).To(Equal([]string{"shop/healthz"}))

	r, err = Simulate(context.Background(), nil, "shop", SimulateRequest{Files: files, Method: "DELETE", Path: "/v1/items"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Rules).To(BeEmpty(), "no rule limits DELETE")

	_, err = Simulate(context.Background(), nil, "shop", SimulateRequest{Files: []string{"testdata/missing.yaml"}})
	g.Expect(err).To(MatchError(ContainSubstring("missing.yaml")))
	_, err = Simulate(context.Background(), nil, "shop", SimulateRequest{Files: files, FromCluster: true})
	g.Expect(err).To(MatchError("--from-cluster needs a cluster"))
}

func TestSimulateReadsAFolder(t *testing.T) {
	g := NewWithT(t)
	out := simulateTranscript(t, []string{"simulate", "-f", "../../config/samples/", "--tenant", "acme", "--path", "/v1/items"})
	g.Expect(out).NotTo(ContainSubstring("error:"))
	g.Expect(out).To(ContainSubstring("Policy public-api, rule api"), "the folder's policies are read, as kubectl apply -f reads them")
}

func TestSimulateSaysToQuoteStatuses(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "login.yaml")
	g.Expect(os.WriteFile(path, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: auth}
spec:
  selector: {matchLabels: {app: auth}}
  upstreamPort: 8080
  rules:
    - name: login
      limits: [{requests: 5, period: 1d}]
      countResponses: {statuses: [401, 403]}
`), 0o644)).To(Succeed())
	out := simulateTranscript(t, []string{"simulate", "-f", path, "--path", "/login"})
	g.Expect(out).To(And(
		ContainSubstring(`spec.rules[0].countResponses.statuses[0]: Invalid value: 401: write HTTP statuses as quoted strings, such as "401" or "5xx"`),
		ContainSubstring(`spec.rules[0].limits[0].period: Invalid value: "1d"`),
		Not(ContainSubstring("must be of type string"))))
}
