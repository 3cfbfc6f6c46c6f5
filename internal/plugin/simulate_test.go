package plugin

import (
	"context"
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
