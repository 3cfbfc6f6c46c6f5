package admin

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/route"
)

// TenantUsage is what /debug/tenant answers: the state of one tenant's
// bucket under one rule, read without consuming anything.
type TenantUsage struct {
	Policy    string `json:"policy"`
	Rule      string `json:"rule"`
	Tier      string `json:"tier,omitempty"`
	Algorithm string `json:"algorithm"`
	// Override is set when the tenant has limits of its own.
	Override bool           `json:"override"`
	Windows  []config.Limit `json:"windows"`
	// Allowed says whether one more request would be admitted now.
	Allowed bool `json:"allowed"`
	// Limit, Remaining and Reset describe the deciding window, as the
	// X-RateLimit-* headers would.
	Limit             int64     `json:"limit"`
	Remaining         int64     `json:"remaining"`
	Reset             time.Time `json:"reset"`
	RetryAfterSeconds float64   `json:"retryAfterSeconds,omitempty"`
	// Reservations are the rule's onLimit.delay bookings (delay_debug.go),
	// omitted for rules without a delay.
	Reservations *Reservations `json:"reservations,omitempty"`
	// Ban is the tenant's ban state, for a rule with a ban.
	Ban *TenantBan `json:"ban,omitempty"`
	// Adaptive is set for an adaptive rule: the factor that scaled Windows.
	Adaptive *TenantAdaptive `json:"adaptive,omitempty"`
}

// debugTenant answers GET /debug/tenant?policy=P&rule=R&tenant=T[&tier=X]
// [&method=M&path=/p&host=h]. tenant is the identity as the policy sees it
// (a header or claim value, a client IP, "sha256:<hex>" for an API key) and
// as overrides name it; empty means the anonymous (or shared) bucket. For a
// rule with partitionBy, method, path and host give the partition.
func (s *Server) debugTenant(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	snap := s.opts.Snapshots.Snapshot()
	if snap == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no configuration loaded"})
		return
	}
	c, override, ok := snap.Table.TenantCheck(route.TenantQuery{
		Policy: q.Get("policy"), Rule: q.Get("rule"), Tenant: q.Get("tenant"), Tier: q.Get("tier"),
		Method: q.Get("method"), Path: q.Get("path"), Host: strings.ToLower(q.Get("host")),
	})
	switch {
	case !ok && snap.Policy(q.Get("policy")) == nil:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %q is not applied by this enforcer", q.Get("policy"))})
		return
	case !ok:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %s has no limited rule %q", q.Get("policy"), q.Get("rule"))})
		return
	}
	usage := TenantUsage{Policy: c.Policy.Name, Rule: c.Rule.Name, Tier: c.Tier, Algorithm: string(c.Request.Algorithm), Override: override}
	usage.Adaptive = s.tenantAdaptive(c.Policy.Name, c.Rule.Name)
	for _, win := range c.Request.Windows {
		usage.Windows = append(usage.Windows, config.Limit{Requests: win.Requests, Period: config.Duration{Duration: win.Period}, Burst: win.Burst})
	}
	d, err := snap.BackendOf(c.Policy).Peek(r.Context(), c.Request, time.Second)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	usage.Allowed, usage.Limit, usage.Remaining, usage.Reset = d.Allowed, d.Limit, d.Remaining, d.Reset
	if !d.Allowed {
		usage.RetryAfterSeconds = d.RetryAfter.Seconds()
	}
	usage.Reservations = s.reservationsOf(c.Request, d, usage.Windows[d.Window])
	if c.Request.Ban != nil {
		if usage.Ban, err = tenantBan(r.Context(), snap.BackendOf(c.Policy), c.Request); err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, usage)
}
