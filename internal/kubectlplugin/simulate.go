package kubectlplugin

import (
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/policyfile"
)

// SimulateRequest is the request kubectl sluice simulate decides.
type SimulateRequest struct {
	Files []string `json:"files"`
	// Tenant is the identity as the policy's identity yields it (a header
	// or claim value, a client IP, sha256:<hex> of an API key), as
	// /debug/tenant and overrides name it; empty is the anonymous bucket.
	Tenant string              `json:"tenant"`
	Method string              `json:"method"`
	Path   string              `json:"path"`
	Host   string              `json:"host,omitempty"`
	Header map[string][]string `json:"header,omitempty"`
	Tier   string              `json:"tier,omitempty"`
	// FromCluster reads each policy's UID from the cluster: the salt of
	// its Redis keys there.
	FromCluster bool `json:"fromCluster,omitempty"`
}

// SimulateReport is what simulate prints: the rules a request of the
// tenant is checked against, with the limits and identity of each.
type SimulateReport struct {
	Namespace string          `json:"namespace"`
	Request   SimulateRequest `json:"request"`
	// Rules are the limited rules that apply, by policy in configuration
	// order; the request passes only if each one does.
	Rules []SimulatedRule `json:"rules"`
	// ExemptBy are the exempt rules that let it through their policy.
	ExemptBy []string `json:"exemptBy,omitempty"`
	// Errors are the policies that did not compile, with why.
	Errors []string `json:"errors,omitempty"`
}

// SimulatedWindow is one window of a rule: Requests per PeriodSeconds or
// per Calendar window, or, for a Concurrency rule, Concurrent alone.
type SimulatedWindow struct {
	Requests int64 `json:"requests,omitempty"`
	// PeriodSeconds is a period window's length; absent for a calendar
	// window.
	PeriodSeconds float64 `json:"periodSeconds,omitempty"`
	// Calendar is a calendar window's unit and zone, "month (Europe/Berlin)".
	Calendar string `json:"calendar,omitempty"`
	Burst    int64  `json:"burst,omitempty"`
	// Concurrent is a Concurrency rule's limit: the requests (times the
	// rule's cost) a tenant may have in flight at once.
	Concurrent int64 `json:"concurrent,omitempty"`
}

// SimulatedOverLimit is what a request over the rule's limit meets.
type SimulatedOverLimit struct {
	// Action is Refuse (429 at once) or Wait (onLimit.delay).
	Action string `json:"action"`
	// WaitSeconds is the longest a request waits before it is refused,
	// and MaxQueued how many of one tenant's requests may wait at once in
	// each enforcer; further ones are refused at once.
	WaitSeconds float64 `json:"waitSeconds,omitempty"`
	MaxQueued   int     `json:"maxQueued,omitempty"`
}

// The actions of SimulatedOverLimit.
const (
	OverLimitRefuse = "Refuse"
	OverLimitWait   = "Wait"
)

// SimulatedRule is one check of the request.
type SimulatedRule struct {
	Policy      string `json:"policy"`
	Rule        string `json:"rule"`
	Mode        string `json:"mode"`
	FailureMode string `json:"failureMode"`
	Tier        string `json:"tier,omitempty"`
	TierReason  string `json:"tierReason,omitempty"`
	Algorithm   string `json:"algorithm"`
	Cost        int64  `json:"cost"`
	// Override says the limits are the tenant's own.
	Override bool     `json:"override"`
	Limits   []string `json:"limits"`
	// Windows are Limits as numbers: requests per period (seconds), and
	// the burst of the algorithms that have one.
	Windows []SimulatedWindow `json:"windows"`
	// Identity is the tenant as the rule counts it, and Sources where the
	// rule reads it from in a request.
	Identity string   `json:"identity"`
	Sources  []string `json:"sources"`
	// TenantHash is the salted hash the rule's Redis keys hold; with
	// --from-cluster, Keys are those keys in the cluster.
	TenantHash string   `json:"tenantHash"`
	Keys       []string `json:"keys,omitempty"`
	// OverLimit is what a request over the limit meets.
	OverLimit SimulatedOverLimit `json:"overLimit"`
	// ResponseCost is what the rule charges when the answer ends;
	// CountResponses which answers keep their count.
	ResponseCost   *SimulatedResponseCost   `json:"responseCost,omitempty"`
	CountResponses *SimulatedCountResponses `json:"countResponses,omitempty"`
}

// SimulatedResponseCost is a rule that charges what the answer reports:
// UpFront (the rule's cost) when the request is admitted, the reported
// cost minus UpFront when the answer ends (into debt if need be), and
// Unfinished instead when the report cannot be read.
type SimulatedResponseCost struct {
	// Header is the response header holding the cost; JSONUsage the field
	// of usage in a JSON answer. One of the two.
	Header     string `json:"header,omitempty"`
	JSONUsage  string `json:"jsonUsage,omitempty"`
	UpFront    int64  `json:"upFront"`
	Unfinished int64  `json:"unfinishedCost"`
}

// SimulatedCountResponses is a rule that counts only the answers of these
// statuses: the others are given back when they end.
type SimulatedCountResponses struct {
	Statuses     []string `json:"statuses,omitempty"`
	GRPCStatuses []string `json:"grpcStatuses,omitempty"`
}

func newSimulateCommand(o *Options) *cobra.Command {
	req := SimulateRequest{}
	var headers []string
	cmd := &cobra.Command{
		Use:   "simulate -f POLICY.yaml --tenant T --path /x [--method GET] [--header K=V ...]",
		Short: "Which rule, which limit and which identity a request meets, from policy files, with no cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			req.Header = h
			var c *Clients
			namespace := ""
			if o.Flags.Namespace != nil {
				namespace = *o.Flags.Namespace
			}
			if req.FromCluster {
				if c, err = o.Clients(); err != nil {
					return err
				}
				namespace = c.Namespace
			}
			report, err := Simulate(cmd.Context(), c, namespace, req)
			if err != nil {
				return err
			}
			return o.print("SimulateReport", report, report.write)
		},
	}
	cmd.Flags().StringSliceVarP(&req.Files, "filename", "f", nil, "policy files (YAML, several documents each), or folders of them (their .yaml, .yml and .json files, as kubectl apply -f reads a folder)")
	cmd.Flags().StringVar(&req.Tenant, "tenant", "", "the tenant as the policy's identity yields it (header or claim value, client IP, sha256:<hex> of an API key); empty: anonymous")
	cmd.Flags().StringVar(&req.Method, "method", http.MethodGet, "the request's method")
	cmd.Flags().StringVar(&req.Path, "path", "/", "the request's path")
	cmd.Flags().StringVar(&req.Host, "host", "", "the request's host (empty: matches whatever a rule asks)")
	cmd.Flags().StringArrayVar(&headers, "header", nil, "a request header K=V (repeatable), from which the tier is read")
	cmd.Flags().StringVar(&req.Tier, "tier", "", "the tier, instead of the one the headers name")
	cmd.Flags().BoolVar(&req.FromCluster, "from-cluster", false, "read the policies' UIDs from the cluster to show their Redis keys there")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// parseHeaders reads K=V (or K:V) arguments.
func parseHeaders(args []string) (map[string][]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	h := http.Header{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			k, v, ok = strings.Cut(a, ":")
		}
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--header %q: give NAME=VALUE", a)
		}
		h.Add(textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k)), strings.TrimSpace(v))
	}
	return h, nil
}

// Simulate compiles req's policy files as the manager does
// (internal/policyfile admits them as the API server would,
// internal/compile compiles them) and asks the enforcer's route table
// which checks a request of the tenant makes, as /debug/tenant does. With
// req.FromCluster, c reads each policy's UID, the salt of its keys.
func Simulate(ctx context.Context, c *Clients, namespace string, req SimulateRequest) (*SimulateReport, error) {
	if req.Path == "" {
		req.Path = "/"
	}
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	ns, policies, err := policyfile.Load(namespace, req.Files...)
	if err != nil {
		return nil, err
	}
	report := &SimulateReport{Namespace: ns, Request: req, Rules: []SimulatedRule{}}
	if req.FromCluster {
		if c == nil {
			return nil, fmt.Errorf("--from-cluster needs a cluster")
		}
		for i := range policies {
			live := &v1alpha1.RateLimitPolicy{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: policies[i].Name}, live); err != nil {
				return nil, apiError(err, "get", "ratelimitpolicies.sluice.dev", ns, policies[i].Name)
			}
			policies[i].UID = live.UID
		}
	}
	res, err := compile.Namespace(ns, policies, compile.Options{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(res.Errors))
	for name := range res.Errors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		report.Errors = append(report.Errors, res.Errors[name].Error())
	}
	table, err := rules.New(res.Config)
	if err != nil {
		return nil, err
	}
	matches, exempt := table.TenantChecks(rules.TenantRequest{Tenant: req.Tenant, Method: req.Method, Path: req.Path,
		Host: strings.ToLower(req.Host), Header: req.Header, Tier: req.Tier})
	for _, e := range exempt {
		report.ExemptBy = append(report.ExemptBy, e.Policy+"/"+e.Rule)
	}
	for i := range matches {
		report.Rules = append(report.Rules, simulatedRule(&matches[i], req))
	}
	return report, nil
}

func simulatedRule(m *rules.TenantMatch, req SimulateRequest) SimulatedRule {
	mode := config.ModeEnforce
	if m.Policy.DryRun {
		mode = config.ModeDryRun
	}
	r := m.Request
	out := SimulatedRule{Policy: m.Policy.Name, Rule: m.Rule.Name, Mode: string(mode), FailureMode: string(m.Policy.Failure.Mode),
		Tier: m.Tier, TierReason: tierChoice(m), Algorithm: string(r.Algorithm), Cost: r.Cost, Override: m.Override,
		Identity: req.Tenant, TenantHash: string(r.Bucket.Tenant)}
	if out.Identity == "" {
		out.Identity = "(anonymous)"
	}
	out.OverLimit = overLimit(m)
	for _, w := range r.Windows {
		if r.Algorithm == config.Concurrency {
			// the limiter's window of slots: its period is their expiry
			out.Limits = append(out.Limits, fmt.Sprintf("%d in flight at once", w.Requests))
			out.Windows = append(out.Windows, SimulatedWindow{Concurrent: w.Requests})
			continue
		}
		sw := SimulatedWindow{Requests: w.Requests, PeriodSeconds: w.Period.Seconds(), Burst: w.Burst}
		per := config.FormatPeriod(w.Period)
		if w.Calendar != nil {
			per = w.Calendar.String()
			sw.Calendar = per
		}
		l := fmt.Sprintf("%d per %s", w.Requests, per)
		if w.Burst > 0 && w.Burst != w.Requests {
			l += fmt.Sprintf(" (burst %d)", w.Burst)
		}
		out.Limits = append(out.Limits, l)
		out.Windows = append(out.Windows, sw)
	}
	if rc := m.Rule.ResponseCost; rc != nil {
		out.ResponseCost = &SimulatedResponseCost{Header: rc.Header, JSONUsage: rc.JSONUsage, UpFront: r.Cost, Unfinished: rc.Unfinished(r.Cost)}
	}
	if c := m.Rule.CountResponses; c != nil {
		out.CountResponses = &SimulatedCountResponses{Statuses: c.Statuses}
		for _, g := range c.GRPCStatuses {
			out.CountResponses.GRPCStatuses = append(out.CountResponses.GRPCStatuses, config.GRPCCodes[g])
		}
	}
	for _, s := range m.Rule.Identity.Sources {
		out.Sources = append(out.Sources, describeSource(s))
	}
	for _, p := range m.Rule.Identity.PartitionBy {
		out.Sources = append(out.Sources, "partitioned by "+string(p))
	}
	if req.FromCluster {
		out.Keys = r.Keys()
	}
	return out
}

// overLimit is what the rule does with a request over its limit.
func overLimit(m *rules.TenantMatch) SimulatedOverLimit {
	r := m.Request
	switch {
	case r.SlotWait > 0:
		return SimulatedOverLimit{Action: OverLimitWait, WaitSeconds: r.SlotWait.Seconds(), MaxQueued: r.SlotQueue}
	case r.Delay > 0:
		return SimulatedOverLimit{Action: OverLimitWait, WaitSeconds: r.Delay.Seconds(), MaxQueued: m.Rule.DelayMaxQueued}
	}
	return SimulatedOverLimit{Action: OverLimitRefuse}
}

// tierChoice says how the tier was found, as /debug/tenant says it.
func tierChoice(m *rules.TenantMatch) string {
	c := m.TierChoice
	switch {
	case c.Default == "":
		return ""
	case c.Source == "" && c.Named != "":
		return "named with --tier"
	case c.Known:
		return c.Source + " names it"
	case c.Named == "":
		return "no " + c.Source + ": the default tier"
	}
	return fmt.Sprintf("%s names %q, no tier of the policy: the default tier", c.Source, c.Named)
}

// describeSource is one identity source in words.
func describeSource(s config.Source) string {
	switch {
	case s.Header != nil:
		return "header " + s.Header.Name
	case s.APIKey != nil:
		return "API key in header " + s.APIKey.Name + " (as sha256:<hex>)"
	case s.JWTClaim != nil:
		return "JWT claim " + s.JWTClaim.Claim
	case s.ClientIP != nil:
		return "client IP"
	case s.Shared != nil:
		return "shared (one bucket for everyone)"
	case s.Descriptor != nil:
		return "descriptor " + s.Descriptor.Key
	}
	return "?"
}
