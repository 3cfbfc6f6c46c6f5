package kubectlplugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// overLimitText says in words what a request over rule's limit meets.
func overLimitText(rule *SimulatedRule) string {
	o := rule.OverLimit
	next := "a request over the limit"
	if len(rule.Windows) == 1 && rule.Windows[0].Concurrent > 0 {
		n := rule.Windows[0].Concurrent / max(rule.Cost, 1)
		next = fmt.Sprintf("with %d in flight, the next request", n)
	}
	if rule.ResponseCost != nil {
		units := "units"
		if rule.ResponseCost.UpFront == 1 {
			units = "unit"
		}
		next = fmt.Sprintf("a request with less than %d %s left, or while the tenant owes a debt,", rule.ResponseCost.UpFront, units)
	}
	if o.Action != OverLimitWait {
		return next + " gets 429 at once"
	}
	wait := config.FormatPeriod(time.Duration(o.WaitSeconds * float64(time.Second)))
	what := "capacity booked for it in Redis"
	if rule.Algorithm == string(config.Concurrency) {
		what = "a slot that one of the tenant's requests on the same enforcer gives back"
	}
	return fmt.Sprintf("%s waits up to %s for %s, then gets 429 (at most %d of the tenant's requests wait at once in each enforcer; further ones get 429 at once)",
		next, wait, what, o.MaxQueued)
}

// chargedText says in words what a responseCost rule charges.
func chargedText(rc *SimulatedResponseCost) string {
	from := "response header " + rc.Header + " (removed before the client sees it)"
	if rc.JSONUsage != "" {
		from = "usage." + rc.JSONUsage + " of the JSON answer"
	}
	return fmt.Sprintf("%d up front; when the answer ends, what %s reports, less the %d (given back if less, into debt if more); %d when the report cannot be read (unfinishedCost)",
		rc.UpFront, from, rc.UpFront, rc.Unfinished)
}

// countsText says in words which answers a countResponses rule counts.
func countsText(c *SimulatedCountResponses) string {
	var which []string
	if len(c.Statuses) > 0 {
		which = append(which, "HTTP status "+strings.Join(c.Statuses, ", "))
	}
	if len(c.GRPCStatuses) > 0 {
		which = append(which, "gRPC status "+strings.Join(c.GRPCStatuses, ", "))
	}
	return "only answers of " + strings.Join(which, " or ") + "; the others are given back when they end"
}

// write prints the report for people.
func (r *SimulateReport) write(w io.Writer) error {
	fmt.Fprintf(w, "%s %s for tenant %q in namespace %s\n", r.Request.Method, r.Request.Path, r.Request.Tenant, r.Namespace)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  ! does not compile: %s\n", e)
	}
	for _, e := range r.ExemptBy {
		fmt.Fprintf(w, "  Exempt by %s: not limited by that policy\n", e)
	}
	if len(r.Rules) == 0 {
		fmt.Fprintln(w, "  No limited rule applies: the request is not limited.")
		return nil
	}
	for _, rule := range r.Rules {
		fmt.Fprintf(w, "  Policy %s, rule %s (%s, failure mode %s)\n", rule.Policy, rule.Rule, rule.Mode, rule.FailureMode)
		limits := strings.Join(rule.Limits, ", ")
		if rule.Override {
			limits += " (the tenant's override)"
		}
		if rc := rule.ResponseCost; rc != nil {
			fmt.Fprintf(w, "    Limit:    %s, %s, in units the answers report\n", limits, rule.Algorithm)
			fmt.Fprintf(w, "    Charged:  %s\n", chargedText(rc))
		} else {
			fmt.Fprintf(w, "    Limit:    %s, %s, cost %d\n", limits, rule.Algorithm, rule.Cost)
		}
		if c := rule.CountResponses; c != nil {
			fmt.Fprintf(w, "    Counts:   %s\n", countsText(c))
		}
		fmt.Fprintf(w, "    Over it:  %s\n", overLimitText(&rule))
		if rule.Tier != "" {
			fmt.Fprintf(w, "    Tier:     %s (%s)\n", rule.Tier, rule.TierReason)
		}
		fmt.Fprintf(w, "    Identity: %s, from %s; tenant hash %s\n", rule.Identity, strings.Join(rule.Sources, ", "), rule.TenantHash)
		for _, k := range rule.Keys {
			fmt.Fprintf(w, "    Key:      %s\n", k)
		}
	}
	if len(r.Rules) > 0 && !r.Request.FromCluster {
		fmt.Fprintln(w, "  (Redis keys are salted with each policy's UID in a cluster: --from-cluster shows them)")
	}
	return nil
}
