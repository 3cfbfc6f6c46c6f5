package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
)

// tenantFlags choose a tenant's rules as /debug/tenant does.
type tenantFlags struct {
	rule, tier, method, path, host string
}

func (f *tenantFlags) add(cmd *cobra.Command, request bool) {
	cmd.Flags().StringVar(&f.rule, "rule", "", "one rule of the policy (default: every rule that applies)")
	if request {
		cmd.Flags().StringVar(&f.tier, "tier", "", "the tier of the tenant's requests (default: the policy's default tier)")
	}
	cmd.Flags().StringVar(&f.method, "method", "", "the request's method: chooses the rules (and a partition of a rule with partitionBy)")
	cmd.Flags().StringVar(&f.path, "path", "", "the request's path")
	cmd.Flags().StringVar(&f.host, "host", "", "the request's host")
}

func (f *tenantFlags) query(policy, tenant string) url.Values {
	q := url.Values{"policy": {policy}, "tenant": {tenant}}
	for k, v := range map[string]string{"rule": f.rule, "tier": f.tier, "method": f.method, "path": f.path, "host": f.host} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// TenantReport is what kubectl sluice tenant prints: the enforcer's
// /debug/tenant answer, and which enforcer gave it.
type TenantReport struct {
	Policy   string `json:"policy"`
	Enforcer string `json:"enforcer"`
	debugapi.TenantReport
}

func newTenantCommand(o *Options) *cobra.Command {
	f := &tenantFlags{}
	cmd := &cobra.Command{
		Use:   "tenant POLICY TENANT",
		Short: "A tenant's usage, remaining, reset and ban on every rule that applies, read from Redis through one enforcer",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Clients()
			if err != nil {
				return err
			}
			report, err := o.Tenant(cmd.Context(), c, args[0], args[1], f)
			if err != nil {
				return err
			}
			return o.print("TenantReport", report, report.write)
		},
	}
	f.add(cmd, true)
	return cmd
}

// Tenant asks one enforcer of policy for tenant's state.
func (o *Options) Tenant(ctx context.Context, c *Clients, policy, tenant string, f *tenantFlags) (*TenantReport, error) {
	_, e, err := o.policyEnforcer(ctx, c, policy, debugapi.Read)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	out := &TenantReport{Policy: policy, Enforcer: e.Pod}
	q := f.query(policy, tenant)
	if f.rule != "" {
		var usage debugapi.TenantUsage
		if err := e.call(ctx, http.MethodGet, "/debug/tenant", q, &usage); err != nil {
			return nil, err
		}
		out.TenantReport = debugapi.TenantReport{Tenant: tenant, Refused: !usage.Allowed && !usage.DryRun, Rules: []debugapi.TenantUsage{usage}}
		return out, nil
	}
	if err := e.call(ctx, http.MethodGet, "/debug/tenant", q, &out.TenantReport); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *TenantReport) write(w io.Writer) error {
	verdict := "admitted"
	switch {
	case r.Refused && r.RefusedBy != nil:
		verdict = fmt.Sprintf("refused by rule %s (Retry-After %ds)", r.RefusedBy.Rule, r.RetryAfterSeconds)
	case r.Refused:
		verdict = "refused"
	case r.WouldDeny:
		verdict = "admitted, but a DryRun rule would refuse it"
	}
	fmt.Fprintf(w, "Tenant %q under policy %s (asked enforcer of pod %s): a request now would be %s\n", r.Tenant, r.Policy, r.Enforcer, verdict)
	for _, e := range r.ExemptBy {
		fmt.Fprintf(w, "  Exempt by rule %s\n", e.Rule)
	}
	if len(r.Rules) == 0 {
		fmt.Fprintln(w, "  No limited rule applies.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RULE\tTIER\tLIMIT\tREMAINING\tRESET\tALLOWED\tBAN")
	for _, u := range r.Rules {
		ban := "-"
		if u.Ban != nil && u.Ban.Banned && u.Ban.Until != nil {
			ban = "until " + u.Ban.Until.UTC().Format(time.RFC3339)
		} else if u.Ban != nil {
			ban = "no"
		}
		reset := "-"
		if !u.Reset.IsZero() {
			reset = u.Reset.UTC().Format(time.RFC3339)
		}
		if u.Error != "" {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t?\t?\t?\t%s\n", u.Rule, dash(u.Tier), u.Limit, "error: "+u.Error)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%t\t%s\n", u.Rule, dash(u.Tier), u.Limit, u.Remaining, reset, u.Allowed, ban)
	}
	return tw.Flush()
}

// ActionReport is what unban and reset print: what each rule's enforcer
// did, and the Event written on the policy.
type ActionReport struct {
	Action  string        `json:"action"`
	Policy  string        `json:"policy"`
	Tenant  string        `json:"tenant"`
	User    string        `json:"user"`
	Results []RuleOutcome `json:"results"`
}

// RuleOutcome is what one rule's bucket became.
type RuleOutcome struct {
	Rule       string `json:"rule"`
	TenantHash string `json:"tenantHash"`
	// Changed: a ban was lifted, or counters were deleted.
	Changed bool `json:"changed"`
}

func newUnbanCommand(o *Options) *cobra.Command {
	f := &tenantFlags{}
	cmd := &cobra.Command{
		Use:   "unban POLICY TENANT",
		Short: "Lift a tenant's ban on a rule (every rule with a ban without --rule), and record it in an Event",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.act(cmd.Context(), "unban", args[0], args[1], f)
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func newResetCommand(o *Options) *cobra.Command {
	f := &tenantFlags{}
	cmd := &cobra.Command{
		Use:   "reset POLICY TENANT",
		Short: "Delete a tenant's counters on a rule (every limited rule without --rule), and record it in an Event",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.act(cmd.Context(), "reset", args[0], args[1], f)
		},
	}
	f.add(cmd, true)
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// act runs unban or reset after the user confirms it, then writes an Event
// on the policy naming the user.
func (o *Options) act(ctx context.Context, action, policy, tenant string, f *tenantFlags) error {
	c, err := o.Clients()
	if err != nil {
		return err
	}
	report, err := o.Act(ctx, c, action, policy, tenant, f)
	if err != nil {
		return err
	}
	return o.print("ActionReport", report, report.write)
}

// Act is unban or reset of tenant under policy (f.rule only, when set).
func (o *Options) Act(ctx context.Context, c *Clients, action, policy, tenant string, f *tenantFlags) (*ActionReport, error) {
	if err := c.require(ctx, permission{verb: "create", resource: "events"}); err != nil {
		return nil, err
	}
	p, e, err := o.policyEnforcer(ctx, c, policy, debugapi.Write)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rules, err := actionRules(p, action, f.rule)
	if err != nil {
		return nil, err
	}
	what := map[string]string{"unban": "lift the ban of", "reset": "delete the counters of"}[action]
	if err := o.confirm(fmt.Sprintf("%s tenant %q under policy %s, rule %s?", what, tenant, policy, strings.Join(rules, ", "))); err != nil {
		return nil, err
	}
	user, err := whoami(ctx, c)
	if err != nil {
		return nil, err
	}
	report := &ActionReport{Action: action, Policy: policy, Tenant: tenant, User: user, Results: []RuleOutcome{}}
	for _, rule := range rules {
		rf := *f
		rf.rule = rule
		q := rf.query(policy, tenant)
		switch action {
		case "unban":
			var lift debugapi.BanLift
			if err := e.call(ctx, http.MethodDelete, "/bans", q, &lift); err != nil {
				return nil, err
			}
			report.Results = append(report.Results, RuleOutcome{Rule: rule, TenantHash: lift.Tenant, Changed: lift.Lifted})
		case "reset":
			var reset debugapi.TenantReset
			if err := e.call(ctx, http.MethodDelete, "/tenant", q, &reset); err != nil {
				return nil, err
			}
			report.Results = append(report.Results, RuleOutcome{Rule: rule, TenantHash: reset.Tenant, Changed: reset.Deleted > 0})
		}
	}
	if err := recordEvent(ctx, c, p, report); err != nil {
		return report, fmt.Errorf("%s done, but the Event on the policy was not written: %w", action, err)
	}
	return report, nil
}

// actionRules are the rules of p that action applies to: rule alone, else
// every rule with a ban (unban) or every limited rule (reset).
func actionRules(p *v1alpha1.RateLimitPolicy, action, rule string) ([]string, error) {
	var out []string
	for _, r := range p.Spec.Rules {
		if r.Exempt || (action == "unban" && r.Ban == nil) || (rule != "" && r.Name != rule) {
			continue
		}
		out = append(out, r.Name)
	}
	if len(out) == 0 {
		if action == "unban" {
			return nil, fmt.Errorf("policy %s has no rule with a ban named %q", p.Name, rule)
		}
		return nil, fmt.Errorf("policy %s has no limited rule named %q", p.Name, rule)
	}
	return out, nil
}

// whoami is the user's name as the API server knows it.
func whoami(ctx context.Context, c *Clients) (string, error) {
	r, err := c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the API server who you are: %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// Event reasons the plugin writes on a policy.
const (
	ReasonTenantUnbanned = "TenantUnbanned"
	ReasonTenantReset    = "TenantReset"
)

// recordEvent writes an Event on the policy saying who did what to which
// tenant.
func recordEvent(ctx context.Context, c *Clients, p *v1alpha1.RateLimitPolicy, r *ActionReport) error {
	reason, did := ReasonTenantUnbanned, "lifted the ban of"
	if r.Action == "reset" {
		reason, did = ReasonTenantReset, "deleted the counters of"
	}
	var parts []string
	for _, o := range r.Results {
		state := "no change"
		if o.Changed {
			state = "done"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", o.Rule, state))
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RateLimitPolicy",
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Reason:  reason,
		Message: fmt.Sprintf("%s %s tenant %q with kubectl sluice: %s", r.User, did, r.Tenant, strings.Join(parts, ", ")),
		Type:    corev1.EventTypeNormal, Source: corev1.EventSource{Component: "kubectl-sluice"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "sluice.dev/kubectl-sluice", ReportingInstance: r.User, Action: r.Action,
	}
	_, err := c.Kube.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return apiError(err, "create", "events", p.Namespace, "")
}

func (r *ActionReport) write(w io.Writer) error {
	for _, o := range r.Results {
		state := "nothing to do"
		switch {
		case o.Changed && r.Action == "unban":
			state = "ban lifted"
		case o.Changed:
			state = "counters deleted"
		case r.Action == "unban":
			state = "was not banned"
		}
		fmt.Fprintf(w, "%s: rule %s, tenant %q (hash %s): %s\n", r.Policy, o.Rule, r.Tenant, o.TenantHash, state)
	}
	_, err := fmt.Fprintf(w, "Recorded in an Event on policy %s as done by %s.\n", r.Policy, r.User)
	return err
}
