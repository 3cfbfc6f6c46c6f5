package config

import (
	"fmt"
	"slices"
	"strings"
)

// Policies with a domain are those of the rate limit service
// (cmd/ratelimit), which answers Envoy's RateLimitService calls. A call
// names a domain and carries descriptors, each a list of key/value
// entries; a rule matches a descriptor by its path (Match.Descriptor).
//
// The rules of one domain form a tree: each prefix of a rule's path is a
// node. A descriptor walks it from the root, entry by entry, choosing at
// each level the child with the entry's key and value, else the first
// child (in rule order) whose wildcard value matches it, else the child
// with the key and no value; the walk ends where no child is found. The
// rule whose path is the node reached after the descriptor's last entry
// decides the descriptor; a descriptor no rule decides is admitted. This is
// envoyproxy/ratelimit's "most specific" match.
//
// A limited rule's identity sources are descriptor and shared, tried in
// order as the proxy tries its own: a descriptor source with a key names
// the tenant by that entry's value when the descriptor has the entry, one
// without a key by all the entries (each distinct set of values counts
// apart), shared puts every descriptor in one bucket; when none finds a
// value, the tenant is anonymous. The tier, when the policy has tiers, is
// the value of one entry (Tiers.Source.Descriptor.Key). Overrides name a
// tenant as a keyed descriptor source finds it. Within a call, a rule
// whose LimitName another matched rule Replaces is dropped; a Shadow rule
// counts what it would refuse and refuses nothing.

// DescriptorEntry is one level of a rule's descriptor path.
type DescriptorEntry struct {
	Key string `json:"key"`
	// Value is the value the entry must have; empty matches any value,
	// and "*" in it any run of characters ("files*", "*.pdf").
	Value string `json:"value,omitempty"`
	// Shared, on a wildcard value, counts every value it matches in one
	// bucket instead of one per value (envoyproxy/ratelimit's
	// share_threshold).
	Shared bool `json:"shared,omitempty"`
}

// Wildcard reports whether e's value is a pattern.
func (e DescriptorEntry) Wildcard() bool { return strings.Contains(e.Value, "*") }

// validateDomain checks what is particular to the policies of the rate
// limit service, and that no other policy uses it.
func (p *Policy) validateDomain(path string, add addFunc) {
	if p.Domain == "" {
		for j := range p.Rules {
			r := &p.Rules[j]
			rpath := fmt.Sprintf("%s.rules[%d](%s)", path, j, r.Name)
			if len(r.Match.Descriptor) > 0 {
				add(rpath+".match.descriptor", "only a policy with a domain matches descriptors")
			}
			if r.LimitName != "" || len(r.Replaces) > 0 || r.Shadow {
				add(rpath, "limitName, replaces and shadow are for rules of a policy with a domain")
			}
			for i, s := range r.Identity.Sources {
				if s.Descriptor != nil {
					add(fmt.Sprintf("%s.identity.sources[%d]", rpath, i), "only a rule of a policy with a domain is named by its descriptor")
				}
			}
		}
		return
	}
	if t := p.Tiers; t != nil && (t.Source.Kind() != SourceDescriptor || t.Source.Descriptor.Key == "") {
		add(path+".tiers.source", "a policy with a domain reads the tier from a descriptor entry: descriptor with a key")
	}
	var paths [][]DescriptorEntry
	for j := range p.Rules {
		r := &p.Rules[j]
		rpath := fmt.Sprintf("%s.rules[%d](%s)", path, j, r.Name)
		r.validateDescriptor(rpath, add)
		for k, prev := range paths {
			if slices.EqualFunc(prev, r.Match.Descriptor, sameLevel) {
				add(rpath+".match.descriptor", "the same path as rules[%d](%s)", k, p.Rules[k].Name)
				break
			}
		}
		paths = append(paths, r.Match.Descriptor)
	}
}

// sameLevel reports whether two entries are one node of the tree.
func sameLevel(a, b DescriptorEntry) bool { return a.Key == b.Key && a.Value == b.Value }

func (r *Rule) validateDescriptor(path string, add addFunc) {
	m := &r.Match
	if len(m.Hosts) > 0 || len(m.Methods) > 0 || len(m.Paths) > 0 {
		add(path+".match", "a rule of a policy with a domain matches descriptors, not hosts, methods or paths")
	}
	if len(m.Descriptor) == 0 {
		add(path+".match.descriptor", "a rule of a policy with a domain needs a descriptor path")
	}
	for i, e := range m.Descriptor {
		at := fmt.Sprintf("%s.match.descriptor[%d]", path, i)
		if e.Key == "" {
			add(at+".key", "must not be empty")
		}
		if e.Shared && !e.Wildcard() {
			add(at+".shared", "only a wildcard value (with '*') is shared by the values it matches")
		}
	}
	for i, name := range r.Replaces {
		switch {
		case name == "":
			add(fmt.Sprintf("%s.replaces[%d]", path, i), "must not be empty")
		case name == r.LimitName:
			add(fmt.Sprintf("%s.replaces[%d]", path, i), "a rule cannot replace its own limit %q", name)
		}
	}
	if r.Exempt {
		return
	}
	// The service answers before the request goes on and never sees the
	// response: it cannot hold a call, nor follow the application's health.
	if r.OnLimit != nil || r.Adaptive != nil {
		add(path, "a rule of a policy with a domain has no onLimit or adaptive")
	}
	id := &r.Identity
	if len(id.PartitionBy) > 0 {
		add(path+".identity.partitionBy", "a rule of a policy with a domain has no partitions")
	}
	named := false
	for i, s := range id.Sources {
		at := fmt.Sprintf("%s.identity.sources[%d]", path, i)
		switch s.Kind() {
		case SourceDescriptor:
			// The descriptors a rule decides have the keys of its path, no other.
			if key := s.Descriptor.Key; key != "" && !slices.ContainsFunc(m.Descriptor, func(e DescriptorEntry) bool { return e.Key == key }) {
				add(at+".descriptor.key", "%q is no key of the rule's descriptor path, so it never names a tenant: add an entry with that key to the path, or give the rule an identity of its own", key)
			}
			named = named || s.Descriptor.Key != ""
		case SourceShared:
		default:
			add(at, "a rule of a policy with a domain is named by descriptor or shared sources")
		}
	}
	if len(r.Overrides) > 0 && !named {
		add(path+".overrides", "an override names a tenant, and no identity source of the rule names one: add a descriptor source with a key")
	}
}

// validateDomains refuses two policies of one domain: a call would not
// know which one answers it.
func (c *Config) validateDomains(add addFunc) {
	seen := map[string]string{}
	for i := range c.Policies {
		p := &c.Policies[i]
		if p.Domain == "" {
			continue
		}
		if other, dup := seen[p.Domain]; dup {
			add(fmt.Sprintf("policies[%d](%s).domain", i, p.Name), "domain %q is also the domain of policy %s", p.Domain, other)
		}
		seen[p.Domain] = p.Name
	}
}
