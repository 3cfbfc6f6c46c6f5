package enforcer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// answerSpec is a policy whose rule llm, 10 per hour per X-Tenant-ID,
// charges what its answers say (extra, YAML).
func answerSpec(algorithm string, extra string) string {
	return policy("llm", fmt.Sprintf(`  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: llm
      algorithm: %s
      limits: [{requests: 10, period: 1h}]
      %s`, algorithm, extra))
}

// TestReportedCostIsChargedThroughTheEnforcer: the application reports a
// cost of 12 in a header; the client never sees it, and the tenant's
// next request waits for the debt.
func TestReportedCostIsChargedThroughTheEnforcer(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sluice-Cost", r.URL.Query().Get("cost"))
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(app.Close)
	debug := freeAddr(t)
	e := start(t, setup{policies: answerSpec("GCRA", "responseCost: {header: X-Sluice-Cost}"), upstream: app.URL,
		args: []string{"--debug-listen", debug}})
	tenant := uniqueTenant(t)

	r := get(t, e.url+"/v1/chat?cost=12", tenant)
	g.Expect(r.status).To(Equal(http.StatusOK))
	g.Expect(r.body).To(Equal("answer"))
	g.Expect(r.header).NotTo(HaveKey("X-Sluice-Cost"))
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 12))
	g.Eventually(func(g Gomega) {
		r := get(t, e.url+"/v1/chat?cost=1", tenant)
		g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
		g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
		// the debt of 2 and the cost of 1 come back 3 emission intervals (18m) later
		g.Expect(r.header.Get("Retry-After")).To(MatchRegexp(`^10[0-8][0-9]$`))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// /debug/tenant shows the debt: 12 charged of 10
	r = get(t, "http://"+debug+"/debug/tenant?tenant="+url.QueryEscape(tenant[len("X-Tenant-ID: "):])+"&path=/v1/chat")
	g.Expect(r.status).To(Equal(http.StatusOK), r.body)
	var report struct {
		Rules []struct {
			Remaining int64 `json:"remaining"`
			Windows   []struct {
				Debt int64 `json:"debt"`
			} `json:"windows"`
		} `json:"rules"`
	}
	g.Expect(json.Unmarshal([]byte(r.body), &report)).To(Succeed(), r.body)
	g.Expect(report.Rules).To(HaveLen(1), r.body)
	g.Expect(report.Rules[0].Remaining).To(BeZero())
	g.Expect(report.Rules[0].Windows).To(HaveLen(1), r.body)
	g.Expect(report.Rules[0].Windows[0].Debt).To(BeNumerically("==", 2), r.body)

	// a report that is not a number charges the cost alone, and is counted
	other := uniqueTenant(t) + "-b"
	g.Expect(get(t, e.url+"/v1/chat?cost=many", other).status).To(Equal(http.StatusOK))
	g.Eventually(func() float64 {
		return metricValue(t, e, "sluice_enforcer_response_reports_invalid_total", `reason="malformed"`)
	}).WithTimeout(10 * time.Second).Should(BeNumerically("==", 1))
	g.Expect(get(t, e.url+"/v1/chat?cost=1", other).header.Get("X-RateLimit-Remaining")).To(Equal("8"))
}

// TestStreamedUsageThroughTheEnforcer: an OpenAI-style event stream
// reaches the client event by event, and the usage of its last event is
// charged.
func TestStreamedUsageThroughTheEnforcer(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}],\"usage\":null}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":6,\"total_tokens\":8}}\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(app.Close)
	e := start(t, setup{policies: answerSpec("FixedWindow", "responseCost: {jsonUsage: total_tokens}"), upstream: app.URL})
	tenant := uniqueTenant(t)

	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(`{"stream":true,"stream_options":{"include_usage":true}}`))
	k, v, _ := strings.Cut(tenant, ": ")
	req.Header.Set(k, v)
	resp, err := client.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	events := bufio.NewReader(resp.Body)
	first, err := events.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first).To(ContainSubstring("Hel"), "the first event arrives before the application has finished")
	close(release)
	rest, err := io.ReadAll(events)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(rest)).To(ContainSubstring(`"total_tokens":8`))
	// the metric is recorded once Redis has the charge
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 8))
	g.Expect(get(t, e.url+"/v1/models", tenant).header.Get("X-RateLimit-Remaining")).To(Equal("1"),
		"8 charged for the stream, 1 for this request")
}

// TestLoginCountsFailedAttemptsOnly: a login rule of 3 per hour counts
// 401s only; successful logins never use it up.
func TestLoginCountsFailedAttemptsOnly(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "right" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(app.Close)
	e := start(t, setup{policies: policy("login", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: login
      algorithm: FixedWindow
      limits: [{requests: 3, period: 1h}]
      countResponses: {statuses: ["401", "403"]}`), upstream: app.URL})
	tenant := uniqueTenant(t)
	for i := range 8 {
		g.Expect(get(t, e.url+"/login", tenant, "X-Password: right").status).To(Equal(http.StatusOK), "success %d", i)
		g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_responses_uncounted_total") }).
			WithTimeout(10 * time.Second).Should(BeNumerically("==", i+1))
	}
	for i := range 3 {
		g.Expect(get(t, e.url+"/login", tenant, "X-Password: wrong").status).To(Equal(http.StatusUnauthorized), "failure %d", i)
	}
	g.Expect(get(t, e.url+"/login", tenant, "X-Password: right").status).To(Equal(http.StatusTooManyRequests))
}

// TestDebtHeaderThroughTheEnforcer: the application reports a cost of 15
// on a GCRA rule of 10 per 20s (a unit every 2s): the tenant owes 5. Its
// next requests are refused with X-RateLimit-Debt, which falls as the
// debt is paid, each with a Retry-After of the debt and the request's own
// unit; once paid the header is gone and a request is admitted.
func TestDebtHeaderThroughTheEnforcer(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sluice-Cost", r.URL.Query().Get("cost"))
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(app.Close)
	e := start(t, setup{upstream: app.URL, policies: policy("llm", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: llm
      algorithm: GCRA
      limits: [{requests: 10, period: 20s}]
      responseCost: {header: X-Sluice-Cost}`)})
	tenant := uniqueTenant(t)

	r := get(t, e.url+"/v1/chat?cost=15", tenant)
	g.Expect(r.status).To(Equal(http.StatusOK))
	g.Expect(r.header).NotTo(HaveKey("X-Ratelimit-Debt"))
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 15))

	r = get(t, e.url+"/v1/chat?cost=1", tenant)
	g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
	g.Expect(r.header.Get("X-RateLimit-Debt")).To(Equal("5"), "15 charged of 10")
	var problem struct {
		Detail string `json:"detail"`
		Debt   int64  `json:"debt"`
	}
	g.Expect(json.Unmarshal([]byte(r.body), &problem)).To(Succeed(), r.body)
	g.Expect(problem.Debt).To(BeNumerically("==", 5), r.body)
	g.Expect(problem.Detail).To(MatchRegexp(`^Rule llm of policy llm allows 10 units per 20s, as the application's answers report them\. ` +
		`The tenant owes 5 units, charged for answers that cost more than the room they were admitted on, and is refused until they are paid back\. Retry in \d+ s\.$`))

	last := int64(5)
	g.Eventually(func(g Gomega) {
		r := get(t, e.url+"/v1/chat?cost=1", tenant)
		if r.status == http.StatusOK {
			g.Expect(r.header).NotTo(HaveKey("X-Ratelimit-Debt"), "admitted: nothing owed")
			return
		}
		g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
		retry, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
		g.Expect(err).NotTo(HaveOccurred())
		var debt int64
		if v := r.header.Get("X-RateLimit-Debt"); v != "" {
			debt, err = strconv.ParseInt(v, 10, 64)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(debt).To(BeNumerically(">", 0))
		}
		// a debt of d units is more than 2(d-1)s and at most 2d s of
		// wait; the request's own unit adds 2s
		g.Expect(retry).To(BeNumerically(">=", 2*debt+1), "debt %d", debt)
		g.Expect(retry).To(BeNumerically("<=", 2*debt+2), "debt %d", debt)
		g.Expect(debt).To(BeNumerically("<=", last), "a debt only falls")
		last = debt
		g.Expect(r.status).To(Equal(http.StatusOK), "still refused, owing %d", debt)
	}).WithTimeout(40 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// TestBudgetRefusalSaysTheRoomARequestNeeds: a tenant of a rule charged by
// its answers, with less room left than the rule's cost and no debt, is
// told the limit in units and the room a request needs.
func TestBudgetRefusalSaysTheRoomARequestNeeds(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sluice-Cost", "6")
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(app.Close)
	e := start(t, setup{upstream: app.URL, policies: policy("llm", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: llm
      algorithm: FixedWindow
      cost: 6
      limits: [{requests: 10, period: 1h}]
      responseCost: {header: X-Sluice-Cost}`)})
	tenant := uniqueTenant(t)
	g.Expect(get(t, e.url+"/v1/chat", tenant).status).To(Equal(http.StatusOK))
	r := get(t, e.url+"/v1/chat", tenant)
	g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
	g.Expect(r.header).NotTo(HaveKey("X-Ratelimit-Debt"))
	g.Expect(r.body).To(MatchRegexp(`"detail":"Rule llm of policy llm allows 10 units per 1h, as the application's answers report them\. ` +
		`A request needs 6 units of room up front, and fewer are left\. Retry in \d+ s\."`))
	g.Expect(r.body).NotTo(ContainSubstring(`"debt"`))
}
