package admin

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// maxDebugHeaders bounds the header parameters of one /debug/tenant query.
const maxDebugHeaders = 32

// debugTenant answers GET /debug/tenant?tenant=T[&policy=P[&rule=R]]
// [&header=Name:Value...][&tier=X][&method=M&path=/p&host=h].
//
// tenant is the identity as the policy sees it (a header or claim value, a
// client IP, "sha256:<hex>" for an API key) and as overrides name it;
// empty means the anonymous (or shared) bucket. header gives the request's
// headers, from which the tier is resolved as the proxy resolves it (the
// policy's default tier when they name none it knows); tier names the tier
// directly instead. method, path and host choose the rules, as the proxy
// matches them; one left out matches whatever a rule asks of it. For a
// rule with partitionBy they also name the partition.
//
// With policy and rule, the answer is that rule's TenantUsage; otherwise a
// TenantReport of every rule that applies (of policy, when given).
func (s *Server) debugTenant(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	snap := s.opts.Snapshots.Snapshot()
	if snap == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no configuration loaded"})
		return
	}
	header, err := debugHeaders(q["header"])
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	policy, rule := q.Get("policy"), q.Get("rule")
	switch {
	case rule != "" && policy == "":
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "rule needs policy: give both, or neither to list every rule that applies"})
		return
	case policy != "" && snap.Policy(policy) == nil:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %q is not applied by this enforcer", policy)})
		return
	}
	matches, exempt := snap.Table.TenantChecks(rules.TenantRequest{
		Policy: policy, Rule: rule, Tenant: q.Get("tenant"), Tier: q.Get("tier"), Header: header,
		Method: q.Get("method"), Path: q.Get("path"), Host: strings.ToLower(q.Get("host")),
	})
	if rule != "" {
		if len(matches) == 0 {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %s has no limited rule %q", policy, rule)})
			return
		}
		usage, err := s.tenantUsage(r.Context(), snap, &matches[0])
		if err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, usage)
		return
	}
	report := debugapi.TenantReport{Tenant: q.Get("tenant"), Rules: []debugapi.TenantUsage{}}
	for _, e := range exempt {
		report.ExemptBy = append(report.ExemptBy, debugapi.RuleRef{Policy: e.Policy, Rule: e.Rule})
	}
	var longest time.Duration
	for i := range matches {
		usage, err := s.tenantUsage(r.Context(), snap, &matches[i])
		if err != nil {
			usage.Error = fmt.Sprintf("%v; meanwhile its failureMode %s decides", err, matches[i].Policy.Failure.Mode)
		}
		report.Rules = append(report.Rules, usage)
		if err != nil || usage.Allowed {
			continue
		}
		if usage.DryRun {
			report.WouldDeny = true
			continue
		}
		// as the proxy names the refusing rule: the longest wait, the first of equals
		if !report.Refused || usage.RetryAfter > longest {
			report.Refused, longest = true, usage.RetryAfter
			report.RetryAfterSeconds = usage.RetryAfterSeconds
			report.RefusedBy = &debugapi.RuleRef{Policy: usage.Policy, Rule: usage.Rule}
		}
	}
	writeJSON(w, http.StatusOK, report)
}

// debugHeaders parses header parameters "Name:Value" into a header.
func debugHeaders(params []string) (http.Header, error) {
	if len(params) > maxDebugHeaders {
		return nil, fmt.Errorf("at most %d header parameters", maxDebugHeaders)
	}
	h := http.Header{}
	for _, p := range params {
		name, value, ok := strings.Cut(p, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
			return nil, fmt.Errorf("a header parameter is Name:Value, as header=X-Plan:premium; got %q", truncate(p, 64))
		}
		h.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
	}
	return h, nil
}

// tierReason says in a sentence how m's tier was found.
func tierReason(m *rules.TenantMatch) string {
	c := m.TierChoice
	if c.Default == "" {
		return "" // the policy has no tiers
	}
	from := "tier=" + truncate(c.Named, 64) + " in the query"
	if c.Source != "" {
		from = c.Source
	}
	switch {
	case c.Known:
		return fmt.Sprintf("%s names tier %s", from, c.Tier)
	case c.Named == "":
		return fmt.Sprintf("no %s: the default tier %s", from, c.Default)
	case c.Like != "":
		return fmt.Sprintf("%s names %q, which is not %s (tiers are compared case-sensitively): the default tier %s",
			from, truncate(c.Named, 64), c.Like, c.Default)
	}
	return fmt.Sprintf("%s names %q, which is no tier of the policy: the default tier %s", from, truncate(c.Named, 64), c.Default)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// limitOf is w as the configuration writes it.
func limitOf(requests int64, period time.Duration, burst int64) config.Limit {
	return config.Limit{Requests: requests, Period: config.Duration{Duration: period}, Burst: burst}
}
