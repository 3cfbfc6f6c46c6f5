package erlconfig

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// DefaultNamespace is the namespace of the compiled configuration when the
// service is given none: part of every Redis key, so every instance sharing
// a Redis must use the same one.
const DefaultNamespace = "ratelimit"

// DefaultTimeout is a domain's Redis budget per call when neither its file
// nor Options sets one.
const DefaultTimeout = 50 * time.Millisecond

// Options say how files compile.
type Options struct {
	// Namespace is the compiled configuration's; empty is DefaultNamespace.
	Namespace string
	// MergeDomains lets several files describe one domain, their
	// descriptors merged (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG);
	// otherwise a domain in two files is refused.
	MergeDomains bool
	// FailureMode decides for the domains whose file sets none
	// (sluice.failureMode) while Redis does not answer; empty is Open.
	FailureMode config.FailureMode
	// Timeout is the Redis budget per call of the domains whose file sets
	// none (sluice.timeout); zero is DefaultTimeout.
	Timeout time.Duration
}

// Compile turns files into one configuration, a policy per domain in the
// order the domains first appear. The result passed config.Validate.
func Compile(files []*File, o Options) (*config.Config, error) {
	c := &config.Config{Schema: config.Schema, Namespace: o.Namespace, Policies: []config.Policy{}}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	var errs []error
	byDomain := map[string]int{}
	from := map[string]*File{}
	// settingsFrom is the file that gave a domain its sluice settings: at
	// most one, or several giving the same.
	settingsFrom := map[string]*File{}
	for _, f := range files {
		i, seen := byDomain[f.Domain]
		switch {
		case seen && !o.MergeDomains:
			errs = append(errs, fmt.Errorf("%s: domain: %q is also the domain of %s (set MERGE_DOMAIN_CONFIG=true to merge them)", f.Name, f.Domain, from[f.Domain].Name))
			continue
		case seen && f.Settings != (DomainSettings{}) && settingsFrom[f.Domain] != nil && f.Settings != settingsFrom[f.Domain].Settings:
			errs = append(errs, fmt.Errorf("%s: sluice: the settings of domain %q differ from those in %s", f.Name, f.Domain, settingsFrom[f.Domain].Name))
			continue
		case !seen:
			byDomain[f.Domain], from[f.Domain] = len(c.Policies), f
			c.Policies = append(c.Policies, config.Policy{})
			i = len(c.Policies) - 1
		}
		p := &c.Policies[i]
		if !seen || (f.Settings != (DomainSettings{}) && settingsFrom[f.Domain] == nil) {
			rules := p.Rules
			*p = newPolicy(f, o)
			p.Rules = rules
		}
		if f.Settings != (DomainSettings{}) {
			settingsFrom[f.Domain] = f
		}
		if err := addRules(p, f); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("compiled configuration: %w", err)
	}
	return c, nil
}

func newPolicy(f *File, o Options) config.Policy {
	s := f.Settings
	p := config.Policy{
		Name:            escape(f.Domain),
		Domain:          f.Domain,
		Generation:      1,
		Replicas:        max(1, s.Replicas),
		Mode:            config.ModeEnforce,
		FailureMode:     config.FailOpen,
		Timeout:         config.Duration{Duration: DefaultTimeout},
		ResponseHeaders: config.HeadersNone,
		// The same for every instance, so that they share buckets.
		Salt: "erl:" + f.Domain,
	}
	if o.FailureMode != "" {
		p.FailureMode = o.FailureMode
	}
	if s.FailureMode != "" {
		p.FailureMode = s.FailureMode
	}
	if o.Timeout != 0 {
		p.Timeout.Duration = o.Timeout
	}
	if s.Timeout != 0 {
		p.Timeout.Duration = s.Timeout
	}
	return p
}

// addRules adds a rule for every node of f's tree that has a rate limit,
// and an exempt rule for every node below which none has one: such a node
// still ends the walk of the descriptors that reach it.
func addRules(p *config.Policy, f *File) error {
	var errs []error
	existing := map[string]bool{}
	for _, r := range p.Rules {
		existing[r.Name] = true
	}
	var walk func(parent []config.DescriptorEntry, parentName string, level []Descriptor)
	walk = func(parent []config.DescriptorEntry, parentName string, level []Descriptor) {
		for i := range level {
			d := &level[i]
			path := append(append([]config.DescriptorEntry(nil), parent...),
				config.DescriptorEntry{Key: d.Key, Value: d.Value, Shared: d.ShareThreshold})
			composite := d.Key
			if d.Value != "" {
				composite += "_" + d.Value
			}
			name := escape(composite)
			if parentName != "" {
				name = parentName + "." + name
			}
			if existing[name] {
				errs = append(errs, fmt.Errorf("%s: %s: descriptor %q of domain %q is also in another file", f.Name, d.path, name, f.Domain))
				continue
			}
			switch {
			case d.RateLimit != nil:
				p.Rules = append(p.Rules, rule(name, path, d))
				existing[name] = true
			case !limits(d.Descriptors):
				p.Rules = append(p.Rules, config.Rule{Name: name, Match: config.Match{Descriptor: path}, Exempt: true})
				existing[name] = true
				continue
			}
			walk(path, name, d.Descriptors)
		}
	}
	walk(nil, "", f.Descriptors)
	return errors.Join(errs...)
}

// limits reports whether a node of level or below has a rate limit.
func limits(level []Descriptor) bool {
	for i := range level {
		if level[i].RateLimit != nil || limits(level[i].Descriptors) {
			return true
		}
	}
	return false
}

func rule(name string, path []config.DescriptorEntry, d *Descriptor) config.Rule {
	rl := d.RateLimit
	r := config.Rule{
		Name:      name,
		Match:     config.Match{Descriptor: path},
		LimitName: rl.Name,
		Replaces:  rl.Replaces,
		Shadow:    d.ShadowMode,
	}
	if rl.Unlimited {
		r.Exempt = true
		return r
	}
	s := rl.Sluice
	r.Algorithm = config.FixedWindow
	if s.Algorithm != "" {
		r.Algorithm = s.Algorithm
	}
	r.Cost = 1
	r.Leasing = s.Leasing
	r.Identity = config.Identity{Sources: []config.Source{{Descriptor: &config.DescriptorSource{}}}}
	r.Limits = append([]config.Limit{{Requests: rl.RequestsPerUnit, Period: config.Duration{Duration: rl.period()}, Burst: s.Burst}}, s.Limits...)
	return r
}

// escape makes a domain or descriptor usable as a policy or rule name,
// which Redis keys hold between '{' and '}' and separate with '/':
// those and '%' are written as %XX, so distinct names stay distinct.
func escape(s string) string {
	if !strings.ContainsAny(s, "%/{}") {
		return s
	}
	return strings.NewReplacer("%", "%25", "/", "%2F", "{", "%7B", "}", "%7D").Replace(s)
}

// unescape undoes escape.
var unescape = strings.NewReplacer("%25", "%", "%2F", "/", "%7B", "{", "%7D", "}")

// statIPv4 is an IPv4 address in a statistic's name, as
// envoyproxy/ratelimit finds it (src/utils.SanitizeStatName).
var statIPv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// StatKey is the key of a rule named name (a descriptor path, escaped) as
// envoyproxy/ratelimit's per-key statistics write it, for dashboards
// that match on it: the descriptor path as the file spells it, with ':'
// and '|' written '_' and the dots of an IPv4 address '_'. A name escape
// left alone (an operator's rule) is itself. It is valid UTF-8, as a
// label value must be.
func StatKey(name string) string {
	s := strings.NewReplacer(":", "_", "|", "_").Replace(strings.ToValidUTF8(unescape.Replace(name), "\uFFFD"))
	return statIPv4.ReplaceAllStringFunc(s, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
}
