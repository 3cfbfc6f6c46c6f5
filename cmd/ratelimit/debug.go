package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rls"
)

// debugTimeout bounds the Redis reads of a /debug/tenant query.
const debugTimeout = 2 * time.Second

// maxDebugEntries bounds the entries of one /debug/tenant query.
const maxDebugEntries = 32

// descriptorReport is what /debug/tenant answers for one descriptor: the
// rule a call with it would be decided by, and that rule's state for its
// bucket, read from Redis without counting anything.
type descriptorReport struct {
	Domain string `json:"domain"`
	// Policy is the domain's RateLimitPolicy, absent for a file's domain.
	Policy  string            `json:"policy,omitempty"`
	Entries []descriptorEntry `json:"entries"`
	// Outcome: "limited" (Rule decides), "no_rule" (admitted, nothing
	// counted), "unlimited", or "zero" (a limit of 0: every hit refused).
	Outcome   string `json:"outcome"`
	Rule      string `json:"rule,omitempty"`
	LimitName string `json:"limitName,omitempty"`
	// Tenant is the entry value that names the bucket, absent when the
	// bucket is the rule's shared one or named by every entry.
	Tenant    string `json:"tenant,omitempty"`
	Override  bool   `json:"override,omitempty"`
	Shadow    bool   `json:"shadow,omitempty"`
	DryRun    bool   `json:"dryRun,omitempty"`
	Algorithm string `json:"algorithm,omitempty"`
	// Windows are the rule's windows for the bucket, each with its state.
	Windows []debugapi.WindowUsage `json:"windows,omitempty"`
	// Allowed says whether one more hit would be admitted now; Limit,
	// Remaining and Reset describe the deciding window, as the call's
	// descriptor status would.
	Allowed           bool       `json:"allowed"`
	Limit             int64      `json:"limit,omitempty"`
	Remaining         int64      `json:"remaining,omitempty"`
	Reset             *time.Time `json:"reset,omitempty"`
	RetryAfterSeconds int64      `json:"retryAfterSeconds,omitempty"`
	Ban               *banReport `json:"ban,omitempty"`
}

type descriptorEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type banReport struct {
	Banned        bool       `json:"banned"`
	Level         int64      `json:"level"`
	Until         *time.Time `json:"until,omitempty"`
	RecentDenials int64      `json:"recentDenials"`
	Denials       int64      `json:"denials"`
}

// debugTenant answers GET /debug/tenant?domain=D&entry=KEY=VALUE&...: the
// entries of one descriptor, in order, as Envoy sends them.
func (s *service) debugTenant(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	domain := q.Get("domain")
	if domain == "" {
		writeDebugJSON(w, http.StatusBadRequest, map[string]string{"error": "domain is required: /debug/tenant?domain=D&entry=KEY=VALUE (one entry parameter per descriptor entry, in order)"})
		return
	}
	params := q["entry"]
	if len(params) == 0 || len(params) > maxDebugEntries {
		writeDebugJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("give 1 to %d entry parameters, KEY=VALUE, in the descriptor's order", maxDebugEntries)})
		return
	}
	report := descriptorReport{Domain: domain}
	entries := make([]*ratelimitv3common.RateLimitDescriptor_Entry, len(params))
	for i, p := range params {
		key, value, ok := strings.Cut(p, "=")
		if !ok || key == "" {
			writeDebugJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("entry %q is not KEY=VALUE", p)})
			return
		}
		entries[i] = &ratelimitv3common.RateLimitDescriptor_Entry{Key: key, Value: value}
		report.Entries = append(report.Entries, descriptorEntry{Key: key, Value: value})
	}
	l, ok := s.rls.Lookup(domain, entries)
	if !ok {
		writeDebugJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("domain %q is not served by this service", domain)})
		return
	}
	report.Policy, report.DryRun = l.Policy, l.DryRun
	switch rule := l.Rule; {
	case rule == nil:
		report.Outcome, report.Allowed = "no_rule", true
	case rule.Unlimited:
		report.Outcome, report.Rule, report.LimitName, report.Allowed = "unlimited", rule.Name, rule.LimitName, true
	case rule.ZeroLimit():
		report.Outcome, report.Rule, report.LimitName = "zero", rule.Name, rule.LimitName
	default:
		report.Outcome, report.Rule, report.LimitName, report.Shadow = "limited", rule.Name, rule.LimitName, rule.Shadow
		report.Tenant, report.Override = l.Tenant, l.Override
		if err := readUsage(r.Context(), l, &report); err != nil {
			writeDebugJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
	}
	writeDebugJSON(w, http.StatusOK, report)
}

// readUsage fills report with the state of l's bucket: the decision of one
// more hit, each window alone, and the ban.
func readUsage(ctx context.Context, l rls.Lookup, report *descriptorReport) error {
	req := l.Request
	report.Algorithm = string(req.Algorithm)
	// the bucket, then each window alone: read in one round trip
	req.Failure.Timeout = debugTimeout
	reads := []limiter.Request{req}
	for i := range req.Windows {
		alone := req
		alone.Windows = req.Windows[i : i+1]
		reads = append(reads, alone)
	}
	ds, errs := l.Backend.Redis.PeekAll(ctx, reads)
	if errs[0] != nil {
		return fmt.Errorf("reading the bucket: %w", errs[0])
	}
	d := ds[0]
	for i, win := range req.Windows {
		wd, err := ds[i+1], errs[i+1]
		if err != nil {
			return fmt.Errorf("reading window %d: %w", i, err)
		}
		report.Windows = append(report.Windows, debugapi.WindowUsage{Limit: admin.WindowLimit(req.Algorithm, win),
			Capacity: wd.Limit, Remaining: wd.Remaining, Reset: wd.Reset, Refusing: !wd.Allowed,
			Current: admin.CalendarWindowAt(win, wd.Now), Debt: wd.Debt})
	}
	if req.Ban != nil {
		ctx, cancel := context.WithTimeout(ctx, debugTimeout)
		st, err := l.Backend.Guard.BanOf(ctx, req.Bucket)
		cancel()
		if err != nil {
			return fmt.Errorf("reading the ban: %w", err)
		}
		report.Ban = &banReport{Banned: st.Active(), Level: st.Level, RecentDenials: st.RecentDenials, Denials: req.Ban.Denials}
		if st.Active() {
			until := st.Until
			report.Ban.Until = &until
			d.Allowed, d.Remaining, d.RetryAfter, d.Reset = false, 0, time.Until(until), until
		}
	}
	reset := d.Reset
	report.Allowed, report.Limit, report.Remaining, report.Reset = d.Allowed, d.Limit, d.Remaining, &reset
	if !d.Allowed {
		report.RetryAfterSeconds = max(int64((d.RetryAfter+time.Second-1)/time.Second), 1)
	}
	return nil
}

func writeDebugJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
