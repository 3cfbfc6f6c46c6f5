package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/enforcer/topk"
)

// TopReport is what kubectl sluice top prints: per rule, the heaviest and
// the most refused tenants of every enforcer of the policy, added up.
type TopReport struct {
	Policy    string    `json:"policy"`
	Enforcers []string  `json:"enforcers"`
	Rules     []RuleTop `json:"rules"`
	// Unreachable are the enforcers that could not be asked, with why.
	Unreachable []string `json:"unreachable,omitempty"`
}

// RuleTop is one rule's top tenants.
type RuleTop struct {
	Rule     string                  `json:"rule"`
	Heaviest []statusdoc.TenantCount `json:"heaviest"`
	Refused  []statusdoc.TenantCount `json:"refused,omitempty"`
}

func newTopCommand(o *Options) *cobra.Command {
	n := 5
	cmd := &cobra.Command{
		Use:   "top POLICY",
		Short: "The heaviest and most refused tenants of each rule over the last minute or two, from every enforcer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Clients()
			if err != nil {
				return err
			}
			report, err := o.Top(cmd.Context(), c, args[0], n)
			if err != nil {
				return err
			}
			return o.print("TopReport", report, report.write)
		},
	}
	cmd.Flags().IntVar(&n, "limit", n, "how many tenants of each rule")
	return cmd
}

// Top asks every enforcer of policy for its top tenants and adds them up.
func (o *Options) Top(ctx context.Context, c *Clients, policy string, n int) (*TopReport, error) {
	p, err := c.getPolicy(ctx, policy)
	if err != nil {
		return nil, err
	}
	pods, err := c.listPods(ctx)
	if err != nil {
		return nil, err
	}
	candidates := enforcerPods(pods, p)
	if len(candidates) == 0 {
		return nil, fmt.Errorf("no running pod selected by policy %s has an enforcer: kubectl sluice explain POD says why", policy)
	}
	report := &TopReport{Policy: policy, Enforcers: []string{}, Rules: []RuleTop{}}
	heaviest, refused := map[string][][]topk.Item{}, map[string][][]topk.Item{}
	for _, pod := range candidates {
		e, err := o.openEnforcer(ctx, c, pod, debugapi.Read)
		if IsPermission(err) {
			return nil, err
		}
		if err != nil {
			report.Unreachable = append(report.Unreachable, err.Error())
			continue
		}
		var doc statusdoc.Document
		err = e.call(ctx, http.MethodGet, statusdoc.Path, nil, &doc)
		e.Close()
		if err != nil {
			report.Unreachable = append(report.Unreachable, err.Error())
			continue
		}
		report.Enforcers = append(report.Enforcers, pod.Name)
		for _, t := range doc.TopTenants {
			if t.Policy == policy {
				heaviest[t.Rule] = append(heaviest[t.Rule], items(t.Heaviest))
				refused[t.Rule] = append(refused[t.Rule], items(t.Refused))
			}
		}
	}
	rules := make([]string, 0, len(heaviest))
	for r := range heaviest {
		rules = append(rules, r)
	}
	slices.Sort(rules)
	for _, r := range rules {
		report.Rules = append(report.Rules, RuleTop{Rule: r, Heaviest: tenantCounts(topk.Merge(n, heaviest[r]...)),
			Refused: tenantCounts(topk.Merge(n, refused[r]...))})
	}
	return report, nil
}

func items(counts []statusdoc.TenantCount) []topk.Item {
	out := make([]topk.Item, len(counts))
	for i, c := range counts {
		out[i] = topk.Item{Key: c.Tenant, Count: c.Count, Error: c.Error}
	}
	return out
}

func tenantCounts(items []topk.Item) []statusdoc.TenantCount {
	out := make([]statusdoc.TenantCount, len(items))
	for i, it := range items {
		out[i] = statusdoc.TenantCount{Tenant: it.Key, Count: it.Count, Error: it.Error}
	}
	return out
}

func (r *TopReport) write(w io.Writer) error {
	fmt.Fprintf(w, "Policy %s, from the enforcers of %s\n", r.Policy, strings.Join(r.Enforcers, ", "))
	for _, u := range r.Unreachable {
		fmt.Fprintf(w, "  ! %s\n", u)
	}
	if len(r.Rules) == 0 {
		fmt.Fprintln(w, "  No request in the last minute or two.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RULE\tTENANT\tREQUESTS\tREFUSED")
	for _, rule := range r.Rules {
		refused := map[string]int64{}
		for _, c := range rule.Refused {
			refused[c.Tenant] = c.Count
		}
		for _, c := range rule.Heaviest {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", rule.Rule, c.Tenant, c.Count, refused[c.Tenant])
		}
	}
	return tw.Flush()
}
