package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// StatusReport is what kubectl sluice status prints.
type StatusReport struct {
	Namespace string         `json:"namespace"`
	Policies  []PolicyStatus `json:"policies"`
}

// PolicyStatus is one policy on one screen: its enforcers, modes, limits
// in force, bans, and what to do about each problem.
type PolicyStatus struct {
	Name               string                    `json:"name"`
	Mode               string                    `json:"mode"`
	FailureMode        string                    `json:"failureMode"`
	Generation         int64                     `json:"generation"`
	ObservedGeneration int64                     `json:"observedGeneration"`
	Enforcers          v1alpha1.EnforcerCounts   `json:"enforcers"`
	Decisions          v1alpha1.DecisionCounts   `json:"decisions"`
	ActiveBans         *int64                    `json:"activeBans,omitempty"`
	EffectiveLimits    []v1alpha1.EffectiveLimit `json:"effectiveLimits,omitempty"`
	Conditions         []Condition               `json:"conditions"`
	// Problems are the conditions that need attention, each with what to
	// do (its message).
	Problems []Problem `json:"problems,omitempty"`
	// Warnings are facts worth knowing that no condition states.
	Warnings []string `json:"warnings,omitempty"`
}

// Condition is one condition of the policy.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Problem is a condition in a state that needs attention, and what to do.
type Problem struct {
	Condition string `json:"condition"`
	Reason    string `json:"reason"`
	Do        string `json:"do"`
}

func newStatusCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "status [POLICY]",
		Short: "Policies with their enforcers, failure mode, limits in force, bans and problems",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Clients()
			if err != nil {
				return err
			}
			report, err := Status(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			return o.print("StatusReport", report, report.write)
		},
	}
}

// Status reads the policies (only names, when given) of the namespace.
func Status(ctx context.Context, c *Clients, names []string) (*StatusReport, error) {
	var policies []v1alpha1.RateLimitPolicy
	if len(names) > 0 {
		for _, n := range names {
			p, err := c.getPolicy(ctx, n)
			if err != nil {
				return nil, err
			}
			policies = append(policies, *p)
		}
	} else {
		var err error
		if policies, err = c.listPolicies(ctx); err != nil {
			return nil, err
		}
	}
	report := &StatusReport{Namespace: c.Namespace, Policies: []PolicyStatus{}}
	for i := range policies {
		report.Policies = append(report.Policies, policyStatus(&policies[i]))
	}
	return report, nil
}

func policyStatus(p *v1alpha1.RateLimitPolicy) PolicyStatus {
	st := PolicyStatus{Name: p.Name, Mode: string(p.Spec.Mode), FailureMode: string(p.Spec.FailureMode),
		Generation: p.Generation, ObservedGeneration: p.Status.ObservedGeneration,
		Enforcers: p.Status.Enforcers, Decisions: p.Status.Decisions, EffectiveLimits: p.Status.EffectiveLimits,
		Conditions: []Condition{}}
	if st.Mode == "" {
		st.Mode = string(v1alpha1.DefaultMode)
	}
	if st.FailureMode == "" {
		// the policy controller writes the default in effect into status
		st.FailureMode = strings.TrimSpace(string(p.Status.FailureMode) + " (the manager's default)")
	}
	if p.Status.Bans != nil {
		n := p.Status.Bans.Active
		st.ActiveBans = &n
	}
	for _, c := range sortedConditions(p.Status.Conditions) {
		st.Conditions = append(st.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
		if needsAttention(c) {
			st.Problems = append(st.Problems, Problem{Condition: c.Type, Reason: c.Reason, Do: c.Message})
		}
	}
	if apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted) == nil {
		st.Warnings = append(st.Warnings, "the manager has not reported on this policy: is sluice-manager running?")
	} else if p.Status.ObservedGeneration < p.Generation {
		st.Warnings = append(st.Warnings, fmt.Sprintf("the status describes generation %d, the spec is generation %d: the manager has not caught up yet",
			p.Status.ObservedGeneration, p.Generation))
	}
	if st.Mode == string(v1alpha1.ModeDryRun) {
		st.Warnings = append(st.Warnings, "mode DryRun: nothing is refused, refusals are counted as wouldDeny")
	}
	return st
}

// conditionOrder is the order status lists conditions in, whatever order
// their writers left them in.
var conditionOrder = []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionReady, v1alpha1.ConditionReconciling,
	v1alpha1.ConditionStalled, v1alpha1.ConditionThrottled}

func sortedConditions(in []metav1.Condition) []metav1.Condition {
	out := slices.Clone(in)
	rank := func(t string) int {
		if i := slices.Index(conditionOrder, t); i >= 0 {
			return i
		}
		return len(conditionOrder)
	}
	slices.SortStableFunc(out, func(a, b metav1.Condition) int {
		if c := rank(a.Type) - rank(b.Type); c != 0 {
			return c
		}
		return strings.Compare(a.Type, b.Type)
	})
	return out
}

// needsAttention says whether c is in a state a user should act on.
func needsAttention(c metav1.Condition) bool {
	switch c.Type {
	case v1alpha1.ConditionAccepted, v1alpha1.ConditionReady:
		return c.Status != metav1.ConditionTrue
	case v1alpha1.ConditionStalled, v1alpha1.ConditionThrottled:
		return c.Status == metav1.ConditionTrue
	}
	return false
}

func (r *StatusReport) write(w io.Writer) error {
	if len(r.Policies) == 0 {
		_, err := fmt.Fprintf(w, "No RateLimitPolicy in namespace %s.\n", r.Namespace)
		return err
	}
	for i, p := range r.Policies {
		if i > 0 {
			fmt.Fprintln(w)
		}
		p.write(w)
	}
	return nil
}

func (p *PolicyStatus) write(w io.Writer) {
	fmt.Fprintf(w, "Policy %s (generation %d, mode %s, failure mode %s)\n", p.Name, p.Generation, p.Mode, p.FailureMode)
	e := p.Enforcers
	fmt.Fprintf(w, "  Enforcers: %d selected, %d injected, %d ready, %d up to date, %d degraded, %d overloaded\n",
		e.Selected, e.Injected, e.Ready, e.UpToDate, e.Degraded, e.Overloaded)
	d := p.Decisions
	fmt.Fprintf(w, "  Decisions: %d allowed, %d denied, %d would deny, %d banned\n", d.Allowed, d.Denied, d.WouldDeny, d.Banned)
	if p.ActiveBans != nil {
		fmt.Fprintf(w, "  Bans:      %d active (kubectl sluice unban %s TENANT lifts one)\n", *p.ActiveBans, p.Name)
	}
	if len(p.EffectiveLimits) > 0 {
		fmt.Fprintln(w, "  Effective limits:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    RULE\tFACTOR\tLIMITS\tLATENCY\tERRORS\tTHROTTLED")
		for _, l := range p.EffectiveLimits {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%t\n", l.Rule, l.Factor, strings.Join(l.Limits, ", "), dash(l.Latency), dash(l.ErrorRate), l.Throttled)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w, "  Conditions:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range p.Conditions {
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", c.Type, c.Status, c.Reason)
	}
	_ = tw.Flush()
	for _, pr := range p.Problems {
		fmt.Fprintf(w, "  ! %s (%s): %s\n", pr.Condition, pr.Reason, pr.Do)
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "  ! %s\n", warn)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
