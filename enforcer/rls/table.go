// Package rls answers Envoy's rate limit service calls
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from the
// policies with a domain of a compiled configuration (enforcer/config),
// deciding with the enforcer's limiter: the same Lua scripts, leases,
// denial cache and failure modes.
//
// Matching follows envoyproxy/ratelimit: a descriptor walks its domain's
// tree of rules (config/descriptor.go) and is decided by the rule at the
// node its last entry reaches, if any; a descriptor no rule decides is
// admitted. The bucket of a rule is its tenant: by default the
// descriptor's entries, so that a rule whose entry has no value (or a
// wildcard one) counts each value apart, unless the wildcard is shared; a
// rule's identity may instead name the tenant by one entry's value
// (descriptor sources with a key), which its overrides name. A policy
// with tiers reads the tier from one entry.
package rls

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
)

// Table is the compiled domains of a configuration: immutable, safe for
// concurrent use.
type Table struct {
	domains map[string]*domain
	// overrides are the rules of descriptors' limit overrides seen so far
	// (override.go), by overrideKey; cachedOverrides counts them.
	overrides       sync.Map
	cachedOverrides atomic.Int64
}

type domain struct {
	name string
	// policy is the domain's policy, which names its buckets and the
	// guard's counters.
	policy string
	dryRun bool
	root   node
	// bucket (its Rule and Tenant unset), salt and failure are the
	// policy's, for the limit overrides of its descriptors (override.go).
	bucket  limiter.Bucket
	salt    string
	failure limiter.FailurePolicy
	// backend decides the domain, nil for the service's own.
	backend *Backend
}

// node is a node of a domain's tree: its children by exact value, by
// wildcard (in rule order), and by key alone; rule is nil for a node that
// only leads to others.
type node struct {
	exact     map[levelKey]*node
	wildcards []wildcard
	keyOnly   map[string]*node
	rule      *Rule
}

type levelKey struct{ key, value string }

type wildcard struct {
	key   string
	parts []string // the value split on '*'
	next  *node
}

// Rule is a compiled rule of a domain.
type Rule struct {
	// Name is the rule's name in the configuration, a metrics label.
	Name string
	// statKey is the descriptor key of the per-key statistics, as
	// envoyproxy/ratelimit writes it (erlconfig.StatKey).
	statKey string
	// LimitName is what responses report and Replaces name.
	LimitName string
	Replaces  []string
	Shadow    bool
	// Unlimited rules admit without asking Redis.
	Unlimited bool

	domain *domain
	path   []config.DescriptorEntry
	// sources are the rule's identity, descriptor and shared sources tried
	// in order (config/descriptor.go).
	sources []config.Source
	salt    string
	// tierKey is the entry that names the tier, "" without tiers.
	tierKey string
	// The limiter's rules: the untiered limits, per tier, per tenant.
	limits    limiter.Rule
	perTier   map[string]limiter.Rule
	overrides map[string]limiter.Rule
	// zero is the one window of a limit override of 0 requests per unit
	// (override.go), which refuses every hit without asking Redis.
	zero []limiter.Window
}

// The buckets of the tenants no entry names: every descriptor of a shared
// source, and those none of the rule's sources finds a value in.
const (
	sharedTenant    = "shared"
	anonymousTenant = "\x00anonymous"
)

// NewTable compiles the policies with a domain of cfg, which passed
// config.Validate; policies without a domain are the proxy's.
func NewTable(cfg *config.Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compile domains: %w", err)
	}
	t := &Table{domains: map[string]*domain{}}
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		if p.Domain == "" {
			continue
		}
		failure := limiter.FailureOf(p)
		d := &domain{name: p.Domain, policy: p.Name, dryRun: p.Mode == config.ModeDryRun, salt: p.Salt, failure: failure,
			bucket: limiter.Bucket{Namespace: cfg.Namespace, Policy: p.Name}}
		for j := range p.Rules {
			r, err := compileRule(cfg.Namespace, p, &p.Rules[j], failure)
			if err != nil {
				return nil, fmt.Errorf("compile domains: domain %s: rule %s: %w", p.Domain, p.Rules[j].Name, err)
			}
			r.domain = d
			d.root.add(r)
		}
		t.domains[p.Domain] = d
	}
	return t, nil
}

func compileRule(namespace string, p *config.Policy, cr *config.Rule, failure limiter.FailurePolicy) (*Rule, error) {
	r := &Rule{Name: cr.Name, statKey: erlconfig.StatKey(cr.Name), LimitName: cr.LimitName, Replaces: cr.Replaces, Shadow: cr.Shadow,
		Unlimited: cr.Exempt, path: cr.Match.Descriptor, salt: p.Salt}
	if r.Unlimited {
		return r, nil
	}
	r.sources = cr.Identity.Sources
	if p.Tiers != nil {
		r.tierKey = p.Tiers.Source.Descriptor.Key
	}
	if cr.Cost < 1 {
		c := *cr
		c.Cost = 1 // a call's own weight is its hits_addend; 1 is the rule's
		cr = &c
	}
	b := limiter.Bucket{Namespace: namespace, Policy: p.Name, Rule: cr.Name}
	var err error
	if r.limits, err = limiter.NewRule(b, cr, limiter.WindowsOf(cr.Limits), failure); err != nil {
		return nil, err
	}
	if len(cr.TierLimits) > 0 {
		r.perTier = make(map[string]limiter.Rule, len(cr.TierLimits))
		for tier, limits := range cr.TierLimits {
			if r.perTier[tier], err = limiter.NewRule(b, cr, limiter.WindowsOf(limits), failure); err != nil {
				return nil, fmt.Errorf("tier %s: %w", tier, err)
			}
		}
	}
	if len(cr.Overrides) > 0 {
		r.overrides = make(map[string]limiter.Rule, len(cr.Overrides))
		for _, o := range cr.Overrides {
			if r.overrides[o.Tenant], err = limiter.NewRule(b, cr, limiter.WindowsOf(o.Limits), failure); err != nil {
				return nil, fmt.Errorf("override %s: %w", o.Tenant, err)
			}
		}
	}
	return r, nil
}

// add puts r at the node of its path, making the nodes on the way.
func (n *node) add(r *Rule) {
	at := n
	for _, e := range r.path {
		at = at.child(e)
	}
	at.rule = r
}

// child is the node of entry e below n, made when missing.
func (n *node) child(e config.DescriptorEntry) *node {
	switch {
	case e.Value == "":
		if next := n.keyOnly[e.Key]; next != nil {
			return next
		}
		if n.keyOnly == nil {
			n.keyOnly = map[string]*node{}
		}
		next := &node{}
		n.keyOnly[e.Key] = next
		return next
	case e.Wildcard():
		for _, w := range n.wildcards {
			if w.key == e.Key && strings.Join(w.parts, "*") == e.Value {
				return w.next
			}
		}
		next := &node{}
		n.wildcards = append(n.wildcards, wildcard{key: e.Key, parts: strings.Split(e.Value, "*"), next: next})
		return next
	default:
		k := levelKey{e.Key, e.Value}
		if next := n.exact[k]; next != nil {
			return next
		}
		if n.exact == nil {
			n.exact = map[levelKey]*node{}
		}
		next := &node{}
		n.exact[k] = next
		return next
	}
}

// Match is the rule that decides a descriptor of domain, nil when none
// does (the domain is unknown, or no rule is at the node the descriptor's
// last entry reaches).
func (t *Table) Match(domain string, entries []*ratelimitv3common.RateLimitDescriptor_Entry) *Rule {
	d := t.domain(domain)
	if d == nil || len(entries) == 0 {
		return nil
	}
	n := &d.root
	for _, e := range entries {
		if n = n.next(e.GetKey(), e.GetValue()); n == nil {
			return nil
		}
	}
	return n.rule
}

func (t *Table) domain(name string) *domain {
	if t == nil {
		return nil
	}
	return t.domains[name]
}

// next is the child of n an entry walks to: its exact value, else the
// first wildcard that matches it, else its key alone.
func (n *node) next(key, value string) *node {
	if next := n.exact[levelKey{key, value}]; next != nil {
		return next
	}
	for _, w := range n.wildcards {
		if w.key == key && wildcardMatch(w.parts, value) {
			return w.next
		}
	}
	return n.keyOnly[key]
}

// wildcardMatch reports whether value matches a pattern split on '*':
// each '*' matches any run of characters, none included.
func wildcardMatch(parts []string, value string) bool {
	if !strings.HasPrefix(value, parts[0]) {
		return false
	}
	value = value[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(value, p)
		if i < 0 {
			return false
		}
		value = value[i+len(p):]
	}
	return strings.HasSuffix(value, last)
}

// Tenant is the bucket of a descriptor r matched, named by the first of
// the rule's identity sources that finds a value: an entry's value, the
// descriptor's entries (a shared wildcard's pattern in place of its
// value), or one bucket for all (shared).
func (r *Rule) Tenant(entries []*ratelimitv3common.RateLimitDescriptor_Entry) limiter.Tenant {
	_, key := r.tenant(entries)
	return limiter.HashTenant(r.salt, key)
}

// tenant is the tenant of a descriptor as overrides name it ("" when no
// entry names it) and what its bucket is hashed from. An entry's value is
// hashed with its key, after a NUL byte: it never names the bucket of
// another key's value, of the shared source or of all the entries.
func (r *Rule) tenant(entries []*ratelimitv3common.RateLimitDescriptor_Entry) (name, key string) {
	for _, s := range r.sources {
		switch {
		case s.Descriptor == nil:
			return "", sharedTenant
		case s.Descriptor.Key == "":
			return "", r.entriesKey(entries)
		}
		if v := entryValue(entries, s.Descriptor.Key); v != "" {
			return v, "\x00" + strconv.Itoa(len(s.Descriptor.Key)) + ":" + s.Descriptor.Key + v
		}
	}
	return "", anonymousTenant
}

// entryValue is the value of the first entry with key, "" when none has.
func entryValue(entries []*ratelimitv3common.RateLimitDescriptor_Entry, key string) string {
	for _, e := range entries {
		if e.GetKey() == key {
			return e.GetValue()
		}
	}
	return ""
}

// entriesKey names the bucket of a descriptor by all its entries.
func (r *Rule) entriesKey(entries []*ratelimitv3common.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	for i, e := range entries {
		v := e.GetValue()
		if i < len(r.path) && r.path[i].Shared {
			v = r.path[i].Value
		}
		// length-prefixed, so that no two descriptors write the same
		b.WriteString(strconv.Itoa(len(e.GetKey())))
		b.WriteByte(':')
		b.WriteString(e.GetKey())
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// Request is what to ask the limiter for a descriptor r matched, counting
// hits requests, under the windows of its tenant's override, else of its
// tier, else the rule's own. Leases and the denial cache hold a bucket's
// answer for the rule's own cost: a call of another weight asks Redis.
func (r *Rule) Request(entries []*ratelimitv3common.RateLimitDescriptor_Entry, hits int64) limiter.Request {
	name, key := r.tenant(entries)
	limits := r.limits
	if w, ok := r.overrides[name]; ok && name != "" {
		limits = w
	} else if w, ok := r.perTier[entryValue(entries, r.tierKey)]; ok && r.tierKey != "" {
		limits = w
	}
	req := limits.Request(limiter.HashTenant(r.salt, key))
	if hits != req.Cost {
		req.Cost, req.Lease = hits, false
	}
	return req
}

// Windows are the rule's untiered windows: do not modify them.
func (r *Rule) Windows() []limiter.Window {
	if r.zero != nil {
		return r.zero
	}
	return r.limits.Windows()
}

// Domain is the domain of the rule.
func (r *Rule) Domain() string { return r.domain.name }
