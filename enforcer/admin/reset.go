package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// authorized serves next to the callers granted access (authorize).
func (s *Server) authorized(access debugapi.Access, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.authorize(w, r, access) {
			next(w, r)
		}
	}
}

// resetTenant answers DELETE /tenant?policy=P&rule=R&tenant=T[&tier=X]
// [&method=M&path=/p&host=h]: it deletes the tenant's counters under the
// rule's windows for the tenant (its override's, or its tier's), as
// /debug/tenant names the bucket, so that its next request starts afresh.
// A ban stays: DELETE /bans lifts it.
func (s *Server) resetTenant(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	policy, rule := q.Get("policy"), q.Get("rule")
	if policy == "" || rule == "" || !q.Has("tenant") {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "policy, rule and tenant are required"})
		return
	}
	snap := s.opts.Snapshots.Snapshot()
	if snap == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no configuration loaded"})
		return
	}
	p := snap.Policy(policy)
	if p == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %q is not applied by this enforcer", policy)})
		return
	}
	matches, _ := snap.Table.TenantChecks(rules.TenantRequest{Policy: policy, Rule: rule, Tenant: q.Get("tenant"),
		Tier: q.Get("tier"), Method: q.Get("method"), Path: q.Get("path"), Host: strings.ToLower(q.Get("host"))})
	if len(matches) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("policy %s has no limited rule %q", policy, rule)})
		return
	}
	req := matches[0].Request
	ctx, cancel := context.WithTimeout(r.Context(), bansTimeout)
	defer cancel()
	n, err := snap.BackendOf(p).Guard.ResetTenant(ctx, req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, debugapi.TenantReset{Policy: policy, Rule: rule, Tenant: string(req.Bucket.Tenant), Deleted: n})
}
