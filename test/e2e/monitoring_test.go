package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/proc"
	"github.com/sluice-dev/sluice/internal/testing/promtest"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// One policy that refuses, one whose failure mode decides while Redis is
// stopped.
const monitoredPolicies = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: limited}
spec:
  selector: {matchLabels: {app: monitored}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - {name: per-tenant, match: {paths: [{prefix: /limited}]}, algorithm: FixedWindow, limits: [{requests: 5, period: 1h}]}
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: open}
spec:
  selector: {matchLabels: {app: monitored}}
  upstreamPort: 8080
  timeout: 1s
  failureMode: Open
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - {name: open, match: {paths: [{prefix: /open}]}, algorithm: SlidingWindowLog, limits: [{requests: 100, period: 1m}]}
`

// What each of the chart's alert expressions returns after the traffic
// below: fires (series, checked), empty (none, checked), or either.
var alertsAfterTraffic = map[string]struct{ expect, why string }{
	"SluiceTrafficSpike":          {"empty", "a few requests a second stay under trafficSpikeMinRate (10/s)"},
	"SluiceDenyRatioHigh":         {"fires", "limited/per-tenant refused 15 of its 20 requests"},
	"SluiceFailureModeActive":     {"fires", "open decided by its failure mode while Redis was stopped"},
	"SluiceCheckErrors":           {"empty", "no request leaves a rule check undecided: only a check the route table failed to prepare (a bug) counts"},
	"SluiceEnforcerConfigRefused": {"empty", "every enforcer loaded its configuration"},
	"SluiceEnforcerConfigStale":   {"empty", "both enforcers serve the namespace's one configuration"},
	"SluiceRedisLatencyHigh":      {"either", "the p99 of loopback round trips on a loaded machine may or may not cross 25ms"},
}

// The panel queries (panel id and title / refId) that return no series
// here, and why the test cannot make them return any.
var panelsWithoutSeries = map[string]string{
	"10 Configuration/A": "counts enforcers that refused their configuration: the manager publishes only configurations " +
		"that load, and the test does not corrupt a pod's volume (the promtool unit test of SluiceEnforcerConfigRefused covers the series)",
	"11 Undecided requests and upstream errors/A": "sluice_enforcer_check_errors_total counts only a rule check the route table " +
		"failed to prepare, which no request can cause (the promtool unit test of SluiceCheckErrors covers the series)",
}

var _ = Describe("Monitoring on a real Prometheus", Ordered, func() {
	const ns = "e2e-monitoring"
	var (
		eps   []stack.Endpoint
		prom  *promtest.Server
		rls   ratelimitv3.RateLimitServiceClient
		root  string
		query = func(ctx context.Context, expr string) []promtest.Sample {
			GinkgoHelper()
			samples, err := prom.Query(ctx, expr)
			Expect(err).NotTo(HaveOccurred())
			return samples
		}
	)

	BeforeAll(func(ctx SpecContext) {
		var err error
		root, err = proc.Root()
		Expect(err).NotTo(HaveOccurred())
		eps = deploy(ctx, ns, monitoredPolicies, "monitored", 8080, 2)
		expectReady(ctx, ns, "limited", 2)
		expectReady(ctx, ns, "open", 2)
		var rlsAdmin string
		rls, rlsAdmin = startRateLimitService(ctx, root)

		// The labels a PodMonitor and the ServiceMonitors give their
		// targets: the alerts and panels group by them.
		targets := []promtest.ScrapeTarget{
			{Job: "sluice-manager", Addr: sluice.Manager.MetricsAddr(), Labels: map[string]string{"namespace": "sluice-system", "pod": "sluice-manager-0"}},
			{Job: "sluice-ratelimit", Addr: rlsAdmin, Labels: map[string]string{"namespace": "sluice-system", "pod": "sluice-ratelimit-0"}},
		}
		for _, ep := range eps {
			targets = append(targets, promtest.ScrapeTarget{Job: "sluice-enforcers", Addr: strings.TrimPrefix(ep.Admin, "http://"),
				Labels: map[string]string{"namespace": ns, "pod": ep.Pod}})
		}
		prom, err = promtest.Start(ctx, targets)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(prom.Close)
		Eventually(func(g Gomega) {
			health, err := prom.TargetHealth(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(health).To(HaveLen(len(targets)))
			for url, h := range health {
				g.Expect(h).To(Equal("up"), url)
			}
		}).WithTimeout(time.Minute).Should(Succeed(), "prometheus scrapes every target")

		// Each counter first appears in a scrape, then grows: a rate needs
		// both. So every kind of traffic comes in two rounds, the second
		// once Prometheus has the series.
		seen := func(expr string) {
			GinkgoHelper()
			Eventually(func() []promtest.Sample { return query(ctx, expr) }).WithTimeout(time.Minute).ShouldNot(BeEmpty(), expr)
		}
		call := func(n int, want ratelimitv3.RateLimitResponse_Code) {
			GinkgoHelper()
			for range n {
				resp, err := rls.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "monitoring",
					Descriptors: []*ratelimitv3common.RateLimitDescriptor{{Entries: []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}}}}})
				Expect(err).NotTo(HaveOccurred())
				Expect(resp.OverallCode).To(Equal(want))
			}
		}
		Expect(codes(spread(eps, 8, http.MethodGet, "/limited", "X-Tenant-ID", "acme"))).To(Equal(map[int]int{http.StatusOK: 5, http.StatusTooManyRequests: 3}))
		call(3, ratelimitv3.RateLimitResponse_OK)
		call(1, ratelimitv3.RateLimitResponse_OVER_LIMIT)
		seen(fmt.Sprintf(`sluice_enforcer_decisions_total{namespace=%q, decision="denied"}`, ns))
		seen(`sluice_ratelimit_calls_total{code="OVER_LIMIT"}`)
		_, err = rls.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "monitoring",
			Descriptors: []*ratelimitv3common.RateLimitDescriptor{{Entries: []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: "tenant", Value: strings.Repeat("a", 9000)}}}}})
		Expect(status.Code(err)).To(Equal(grpccodes.InvalidArgument), "a value past --max-entry-bytes")
		seen(`sluice_ratelimit_oversized_calls_total{domain="monitoring", bound="entry_bytes"}`)
		Expect(codes(spread(eps, 12, http.MethodGet, "/limited", "X-Tenant-ID", "acme"))).To(Equal(map[int]int{http.StatusTooManyRequests: 12}))
		call(2, ratelimitv3.RateLimitResponse_OVER_LIMIT)

		sluice.Redis.Stop()
		DeferCleanup(func() { _ = sluice.Redis.Restart() })
		Expect(codes(spread(eps, 4, http.MethodGet, "/open", "X-Tenant-ID", "acme"))).To(Equal(map[int]int{http.StatusOK: 4}))
		seen(fmt.Sprintf(`sluice_enforcer_failure_mode_decisions_total{namespace=%q, policy="open"}`, ns))
		Expect(codes(spread(eps, 4, http.MethodGet, "/open", "X-Tenant-ID", "acme"))).To(Equal(map[int]int{http.StatusOK: 4}))
		Expect(sluice.Redis.Restart()).To(Succeed())
		expectReady(ctx, ns, "open", 2)
	}, NodeTimeout(4*time.Minute))

	It("evaluates every alert of the chart, and the ones the traffic calls for fire", func(ctx SpecContext) {
		rules, err := promtest.RulesFile(root)
		Expect(err).NotTo(HaveOccurred())
		alerts, err := promtest.Alerts(rules)
		Expect(err).NotTo(HaveOccurred())
		Expect(alerts).NotTo(BeEmpty())
		for _, a := range alerts {
			want, ok := alertsAfterTraffic[a.Name]
			Expect(ok).To(BeTrue(), "alertsAfterTraffic says nothing of %s: add what it returns here and why", a.Name)
			switch want.expect {
			case "fires":
				Eventually(func() []promtest.Sample { return query(ctx, a.Expr) }).WithTimeout(time.Minute).
					Should(ContainElement(HaveField("Metric", HaveKeyWithValue("namespace", ns))), "%s fires: %s", a.Name, want.why)
			case "empty":
				Expect(query(ctx, a.Expr)).To(BeEmpty(), "%s stays quiet: %s", a.Name, want.why)
			default:
				query(ctx, a.Expr) // evaluates without error
			}
			fmt.Fprintf(GinkgoWriter, "alert %s (%s): %d series\n", a.Name, want.expect, len(query(ctx, a.Expr)))
		}
		for _, name := range []string{"SluiceDenyRatioHigh", "SluiceFailureModeActive"} {
			Expect(alerts).To(ContainElement(HaveField("Name", name)))
		}
		byName := map[string]promtest.Alert{}
		for _, a := range alerts {
			byName[a.Name] = a
		}
		Expect(query(ctx, byName["SluiceDenyRatioHigh"].Expr)).To(ContainElement(HaveField("Metric",
			Equal(map[string]string{"namespace": ns, "policy": "limited", "rule": "per-tenant"}))))
		Expect(query(ctx, byName["SluiceFailureModeActive"].Expr)).To(ContainElement(HaveField("Metric",
			Equal(map[string]string{"namespace": ns, "policy": "open", "mode": "Open"}))))
	})

	It("answers every panel of the dashboard, with the namespace and its policies as the variables' values", func(ctx SpecContext) {
		d, err := promtest.ReadDashboard(root)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Problems()).To(BeEmpty())

		// The variables' own queries, label_values(match, label), list them.
		Expect(prom.LabelValues(ctx, "namespace", "sluice_enforcer_decisions_total")).To(ContainElement(ns))
		Expect(prom.LabelValues(ctx, "policy", fmt.Sprintf(`sluice_enforcer_decisions_total{namespace=~%q}`, ns))).
			To(ConsistOf("limited", "open"))

		// As Grafana sends them: one namespace, two policies as a regex,
		// and $__rate_interval at least four scrape intervals (1s).
		queries, err := d.Queries(map[string]string{"namespace": ns, "policy": "(limited|open)", "__rate_interval": "10s"})
		Expect(err).NotTo(HaveOccurred())
		Expect(queries).NotTo(BeEmpty())
		listed := map[string]bool{}
		for _, q := range queries {
			key := q.Panel + "/" + q.RefID
			listed[key] = true
			if why, ok := panelsWithoutSeries[key]; ok {
				Expect(query(ctx, q.PromQL)).To(BeEmpty(), "panel %s returns series now: take it off panelsWithoutSeries (%s)", key, why)
				continue
			}
			Eventually(func() []promtest.Sample { return query(ctx, q.PromQL) }).WithTimeout(time.Minute).
				ShouldNot(BeEmpty(), "panel %s: %s", key, q.PromQL)
			fmt.Fprintf(GinkgoWriter, "panel %s: %d series\n", key, len(query(ctx, q.PromQL)))
		}
		for key := range panelsWithoutSeries {
			Expect(listed).To(HaveKey(key), "panelsWithoutSeries names a query the dashboard does not have")
		}
	})

	It("scrapes the manager's metrics", func(ctx SpecContext) {
		Expect(query(ctx, `up{job="sluice-manager"} == 1`)).To(HaveLen(1))
		Expect(query(ctx, `controller_runtime_reconcile_total{job="sluice-manager"}`)).NotTo(BeEmpty())
	})
})

// startRateLimitService builds and runs sluice-ratelimit on the stack's
// Redis, with a domain "monitoring" of 3 calls a day per tenant (a window that does not end during the test), until
// the suite ends; it returns its client and its admin listener's address.
func startRateLimitService(ctx context.Context, root string) (ratelimitv3.RateLimitServiceClient, string) {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", "sluice-ratelimit-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	bin := filepath.Join(dir, "sluice-ratelimit")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ratelimit")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/ratelimit: %s", out)
	config := filepath.Join(dir, "config")
	Expect(os.Mkdir(config, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(config, "monitoring.yaml"),
		[]byte("domain: monitoring\ndescriptors: [{key: tenant, rate_limit: {unit: day, requests_per_unit: 3}}]\n"), 0o644)).To(Succeed())

	addrs, err := freeport.LoopbackAddrs(2)
	Expect(err).NotTo(HaveOccurred())
	p, err := stack.StartProcess("sluice-ratelimit", filepath.Join(dir, "sluice-ratelimit.log"), exec.Command(bin,
		"--config-dir", config, "--redis-url", sluice.Redis.URL(), "--listen", addrs[0], "--admin-listen", addrs[1],
		"--http-listen", "", "--redis-timeout", "1s"))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { p.Stop(10 * time.Second) })
	Eventually(func(g Gomega) {
		g.Expect(p.Running()).To(BeTrue(), "sluice-ratelimit runs: %s", p.LogTail(2000))
		resp, err := httpClient.Get("http://" + addrs[1] + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	conn, err := grpc.NewClient(addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(conn.Close)
	return ratelimitv3.NewRateLimitServiceClient(conn), addrs[1]
}
