package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// bansTimeout bounds the Redis calls of one /bans request or one count of
// a /status document's active bans.
const bansTimeout = 2 * time.Second

// banRules are the rules with a ban of the policy named policy, only rule
// when it is not empty, with their backend; an error message otherwise.
func (s *Server) banRules(policy, rule string) (*engine.Backend, []*rules.Rule, string) {
	snap := s.opts.Snapshots.Snapshot()
	if snap == nil {
		return nil, nil, "no configuration loaded"
	}
	p := snap.Policy(policy)
	if p == nil {
		return nil, nil, fmt.Sprintf("policy %q is not applied by this enforcer", policy)
	}
	var rules []*rules.Rule
	for _, r := range p.Limited() {
		if r.Ban != nil && (rule == "" || r.Name == rule) {
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		return nil, nil, fmt.Sprintf("policy %s has no rule with a ban named %q", policy, rule)
	}
	return snap.BackendOf(p), rules, ""
}

// listBans answers GET /bans?policy=P[&rule=R].
func (s *Server) listBans(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	be, rules, why := s.banRules(q.Get("policy"), q.Get("rule"))
	if why != "" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": why})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), bansTimeout)
	defer cancel()
	out := debugapi.BanList{Policy: q.Get("policy"), Bans: []debugapi.BanItem{}}
	snap := s.opts.Snapshots.Snapshot()
	for _, rule := range rules {
		_, _, lr, _ := snap.Table.BanRule(out.Policy, rule.Name)
		bans, err := be.Guard.ListBans(ctx, lr.Request("-").Bucket)
		if err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		for _, b := range bans {
			out.Bans = append(out.Bans, debugapi.BanItem{Rule: rule.Name, Tenant: string(b.Tenant), Until: b.Until, Level: b.Level})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// liftBan answers DELETE /bans?policy=P&rule=R&tenantHash=H, or with
// tenant=T (the identity as the policy sees it, as /debug/tenant takes it,
// with method, path and host for a rule with partitionBy) instead of
// tenantHash.
func (s *Server) liftBan(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	policy, rule := q.Get("policy"), q.Get("rule")
	if rule == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "rule is required"})
		return
	}
	be, _, why := s.banRules(policy, rule)
	if why != "" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": why})
		return
	}
	snap := s.opts.Snapshots.Snapshot()
	var req limiter.Request
	switch hash := q.Get("tenantHash"); {
	case hash != "" && q.Has("tenant"):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "give tenant or tenantHash, not both"})
		return
	case hash != "":
		if strings.ContainsAny(hash, "{}/") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "tenantHash is the hash GET /bans lists"})
			return
		}
		_, _, lr, _ := snap.Table.BanRule(policy, rule)
		req = lr.Request(limiter.Tenant(hash))
	case q.Has("tenant"):
		c, _, _ := snap.Table.TenantCheck(rules.TenantQuery{Policy: policy, Rule: rule, Tenant: q.Get("tenant"),
			Method: q.Get("method"), Path: q.Get("path"), Host: strings.ToLower(q.Get("host"))})
		req = c.Request
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "tenant or tenantHash is required"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), bansTimeout)
	defer cancel()
	lifted, err := be.Guard.LiftBan(ctx, req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, debugapi.BanLift{Policy: policy, Rule: rule, Tenant: string(req.Bucket.Tenant), Lifted: lifted})
}

// addActiveBans counts, for each policy of doc with a ban, the tenants
// banned now, from Redis. A policy whose count Redis could not give is
// left without one.
func (s *Server) addActiveBans(ctx context.Context, doc *status.Document) {
	snap := s.opts.Snapshots.Snapshot()
	if snap == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, bansTimeout)
	defer cancel()
	for i := range doc.Policies {
		p := snap.Policy(doc.Policies[i].Name)
		if p == nil {
			continue
		}
		var active int64
		var hasBan, failed bool
		for _, rule := range p.Limited() {
			if rule.Ban == nil {
				continue
			}
			hasBan = true
			_, _, lr, _ := snap.Table.BanRule(p.Name, rule.Name)
			n, err := snap.BackendOf(p).Guard.ActiveBans(ctx, lr.Request("-").Bucket)
			if err != nil {
				failed = true
				break
			}
			active += n
		}
		if hasBan && !failed {
			doc.Policies[i].Bans = &status.Bans{Active: active}
		}
	}
}

func tenantBan(ctx context.Context, be *engine.Backend, req limiter.Request) (*debugapi.TenantBan, error) {
	ctx, cancel := context.WithTimeout(ctx, bansTimeout)
	defer cancel()
	st, err := be.Guard.BanOf(ctx, req.Bucket)
	if err != nil {
		return nil, err
	}
	out := &debugapi.TenantBan{Banned: st.Active(), Level: st.Level, RecentDenials: st.RecentDenials, Denials: req.Ban.Denials}
	if st.Active() {
		until := st.Until
		out.Until, out.RemainingSeconds = &until, time.Until(until).Seconds()
	}
	return out, nil
}
