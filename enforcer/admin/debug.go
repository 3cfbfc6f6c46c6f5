package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/identity"
	"github.com/sluice-dev/sluice/enforcer/limiter"
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
	var cp *config.Policy
	for i := range snap.Config.Policies {
		if snap.Config.Policies[i].Name == q.Get("policy") {
			cp = &snap.Config.Policies[i]
		}
	}
	if cp == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %q is not applied by this enforcer", q.Get("policy"))})
		return
	}
	var rule *config.Rule
	for j := range cp.Rules {
		if cp.Rules[j].Name == q.Get("rule") && !cp.Rules[j].Exempt {
			rule = &cp.Rules[j]
		}
	}
	if rule == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %s has no limited rule %q", cp.Name, q.Get("rule"))})
		return
	}
	path := q.Get("path")
	if path != "" {
		path = identity.CleanPath(path)
	}
	usage, req := tenantRequest(snap.Config.Namespace, cp, rule, q.Get("tenant"), q.Get("tier"),
		map[string]string{"Method": q.Get("method"), "Path": path, "Host": strings.ToLower(q.Get("host"))})
	be := snap.BackendOf(snap.Policy(cp.Name))
	d, err := be.Peek(r.Context(), req, time.Second)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	usage.Allowed, usage.Limit, usage.Remaining, usage.Reset = d.Allowed, d.Limit, d.Remaining, d.Reset
	if !d.Allowed {
		usage.RetryAfterSeconds = d.RetryAfter.Seconds()
	}
	writeJSON(w, http.StatusOK, usage)
}

// tenantRequest is the limiter request the route table would make for this
// tenant under rule, following the same choice of windows: the tenant's
// override, else its tier's limits, else the rule's.
func tenantRequest(namespace string, p *config.Policy, rule *config.Rule, tenant, tier string, partition map[string]string) (TenantUsage, limiter.Request) {
	if tenant == "" {
		tenant = identity.Anonymous
		if len(rule.Identity.Sources) > 0 && rule.Identity.Sources[0].Shared != nil {
			tenant = identity.Shared
		}
	}
	if p.Tiers != nil {
		if _, known := rule.TierLimits[tier]; !known {
			tier = p.Tiers.Default
		}
	} else {
		tier = ""
	}
	u := TenantUsage{Policy: p.Name, Rule: rule.Name, Tier: tier, Algorithm: rule.Algorithm, Windows: rule.Limits}
	name := identity.Identity{Tenant: tenant}.Name()
	if tl, ok := rule.TierLimits[tier]; ok {
		u.Windows = tl
	}
	if i := slices.IndexFunc(rule.Overrides, func(o config.Override) bool { return o.Tenant == name }); i >= 0 {
		u.Windows, u.Override = rule.Overrides[i].Limits, true
	}
	key := tenant
	if len(rule.Identity.PartitionBy) > 0 {
		var b strings.Builder
		b.WriteString(tenant)
		for _, k := range rule.Identity.PartitionBy {
			b.WriteByte(0)
			b.WriteString(partition[k])
		}
		key = b.String()
	}
	return u, limiter.Request{
		Bucket:    limiter.Bucket{Namespace: namespace, Policy: p.Name, Rule: rule.Name, Tenant: limiter.HashTenant(p.Salt, key)},
		Algorithm: limiter.Algorithm(rule.Algorithm),
		Windows:   config.Windows(u.Windows),
		Cost:      max(rule.Cost, 1),
	}
}
