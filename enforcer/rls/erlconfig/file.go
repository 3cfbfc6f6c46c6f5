package erlconfig

import (
	"fmt"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// File is one configuration file: the descriptors of one domain.
//
//	domain: shop
//	sluice: {failureMode: Closed, timeout: 50ms, replicas: 3}   # optional
//	descriptors:
//	  - key: remote_address
//	    rate_limit: {unit: minute, requests_per_unit: 60}
//	  - key: path
//	    value: "/v1/exports*"
//	    rate_limit:
//	      requests_per_unit: 100
//	      sluice: {algorithm: SlidingWindowLog, period: 5m, limits: [{requests: 1000, period: 24h}]}
type File struct {
	// Name is where the file was read from, in every error about it.
	Name        string
	Domain      string
	Settings    DomainSettings
	Descriptors []Descriptor
}

// DomainSettings are the top-level `sluice` key: how the domain's policy
// behaves when Redis fails. Zero values are the defaults.
type DomainSettings struct {
	FailureMode config.FailureMode
	Timeout     time.Duration
	// Replicas is how many rate limit service instances share the limits,
	// so that under LocalFallback each one admits its share.
	Replicas int32
}

// Descriptor is one node of a domain's descriptor tree.
type Descriptor struct {
	Key   string
	Value string
	// RateLimit is nil for a node that only leads to others.
	RateLimit   *RateLimit
	Descriptors []Descriptor
	ShadowMode  bool
	// ShareThreshold counts every value a wildcard matches in one bucket.
	ShareThreshold bool
	// DetailedMetric and ValueToMetric name envoyproxy/ratelimit's
	// statistics; they are accepted and change no decision.
	DetailedMetric, ValueToMetric bool

	// path is where the node is in its file, for messages.
	path string
}

// RateLimit is a node's limit, or Unlimited.
type RateLimit struct {
	// Unit is second, minute, hour, day, week, month (30 days) or year
	// (365 days); empty with Unlimited or when Sluice sets a period.
	Unit            string
	RequestsPerUnit int64
	Unlimited       bool
	Name            string
	Replaces        []string
	Sluice          LimitSettings
}

// LimitSettings are a rate_limit's `sluice` key. Without it a limit is
// envoyproxy/ratelimit's: a fixed window of one unit.
type LimitSettings struct {
	Algorithm config.Algorithm
	// Period replaces the unit: requests_per_unit per Period.
	Period time.Duration
	// Burst is the capacity of a TokenBucket or GCRA limit.
	Burst int64
	// Limits are further windows: a request must fit every one.
	Limits  []config.Limit
	Leasing config.Leasing
}

// unitPeriods are envoyproxy/ratelimit's units, with its lengths: a month
// is 30 days and a year 365, and windows are aligned on the Unix epoch.
var unitPeriods = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
	"week":   7 * 24 * time.Hour,
	"month":  30 * 24 * time.Hour,
	"year":   365 * 24 * time.Hour,
}

// Parse decodes one file; name is where it came from, in every error.
func Parse(name string, data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := &File{Name: name}
	d := &decoder{}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty: it needs a domain and descriptors", name)
	}
	d.fields("", doc.Content[0], map[string]func(string, *yaml.Node){
		"domain":      d.str(&f.Domain),
		"sluice":      func(path string, n *yaml.Node) { d.domainSettings(path, n, &f.Settings) },
		"descriptors": func(path string, n *yaml.Node) { f.Descriptors = d.descriptors(path, n) },
	})
	if f.Domain == "" && len(d.errs) == 0 {
		d.fail("domain", child(doc.Content[0], "domain"), "must not be empty")
	}
	if err := d.err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

func (d *decoder) domainSettings(path string, n *yaml.Node, s *DomainSettings) {
	var mode, timeout string
	d.fields(path, n, map[string]func(string, *yaml.Node){
		"failureMode": d.str(&mode),
		"timeout":     d.str(&timeout),
		"replicas":    func(p string, v *yaml.Node) { d.scalar(p, v, &s.Replicas) },
	})
	if mode != "" {
		s.FailureMode = config.FailureMode(mode)
		d.oneOf(path+".failureMode", child(n, "failureMode"), s.FailureMode, config.FailureModes)
	}
	if timeout != "" {
		s.Timeout = d.duration(path+".timeout", child(n, "timeout"), timeout)
		if s.Timeout < time.Millisecond || s.Timeout > time.Second {
			d.fail(path+".timeout", child(n, "timeout"), "must be between 1ms and 1s, got %s", timeout)
		}
	}
	if s.Replicas < 0 {
		d.fail(path+".replicas", child(n, "replicas"), "must not be negative, got %d", s.Replicas)
	}
}

// descriptors decodes one level of the tree, refusing two nodes of one
// composite key (key, or key_value) as envoyproxy/ratelimit does.
func (d *decoder) descriptors(path string, n *yaml.Node) []Descriptor {
	var out []Descriptor
	seen := map[string]int{}
	d.list(path, n, func(at string, i int, v *yaml.Node) {
		desc := d.descriptor(at, v)
		composite := desc.Key
		if desc.Value != "" {
			composite += "_" + desc.Value
		}
		if j, dup := seen[composite]; dup {
			d.fail(at, v, "the same descriptor (%q) as %s[%d]", composite, path, j)
		}
		seen[composite] = i
		out = append(out, desc)
	})
	return out
}

func (d *decoder) descriptor(path string, n *yaml.Node) Descriptor {
	desc := Descriptor{path: path}
	var quota bool
	d.fields(path, n, map[string]func(string, *yaml.Node){
		"key":             d.str(&desc.Key),
		"value":           d.str(&desc.Value),
		"rate_limit":      func(p string, v *yaml.Node) { desc.RateLimit = d.rateLimit(p, v) },
		"descriptors":     func(p string, v *yaml.Node) { desc.Descriptors = d.descriptors(p, v) },
		"shadow_mode":     d.flag(&desc.ShadowMode),
		"detailed_metric": d.flag(&desc.DetailedMetric),
		"value_to_metric": d.flag(&desc.ValueToMetric),
		"share_threshold": d.flag(&desc.ShareThreshold),
		"quota_mode":      d.flag(&quota),
		"metadata": func(p string, v *yaml.Node) {
			d.fail(p, v, "response metadata is not supported by this service: remove it")
		},
	})
	if desc.Key == "" {
		d.fail(path+".key", child(n, "key"), "must not be empty")
	}
	if quota {
		d.fail(path+".quota_mode", child(n, "quota_mode"), "quota mode is not supported by this service: remove it or set it to false")
	}
	if desc.ShareThreshold && !strings.Contains(desc.Value, "*") {
		d.fail(path+".share_threshold", child(n, "share_threshold"), "only a wildcard value (with '*') shares its threshold, got value %q", desc.Value)
	}
	return desc
}

func (d *decoder) rateLimit(path string, n *yaml.Node) *RateLimit {
	rl := &RateLimit{}
	var haveRequests bool
	d.fields(path, n, map[string]func(string, *yaml.Node){
		"unit": d.str(&rl.Unit),
		"requests_per_unit": func(p string, v *yaml.Node) {
			haveRequests = true
			d.scalar(p, v, &rl.RequestsPerUnit)
		},
		"unlimited": d.flag(&rl.Unlimited),
		"name":      d.str(&rl.Name),
		"replaces": func(p string, v *yaml.Node) {
			d.list(p, v, func(at string, _ int, item *yaml.Node) {
				var name string
				d.fields(at, item, map[string]func(string, *yaml.Node){"name": d.str(&name)})
				switch {
				case name == "":
					d.fail(at+".name", child(item, "name"), "must not be empty")
				case name == rl.Name:
					d.fail(at+".name", child(item, "name"), "a rate limit cannot replace itself (%q)", name)
				}
				rl.Replaces = append(rl.Replaces, name)
			})
		},
		"sluice": func(p string, v *yaml.Node) { d.limitSettings(p, v, &rl.Sluice) },
	})
	rl.Unit = strings.ToLower(rl.Unit)
	_, validUnit := unitPeriods[rl.Unit]
	switch {
	case rl.Unlimited && rl.Unit != "":
		d.fail(path+".unit", child(n, "unit"), "an unlimited rate limit has no unit")
	case rl.Unlimited && (rl.Sluice.Period != 0 || rl.Sluice.Algorithm != ""):
		d.fail(path+".sluice", child(n, "sluice"), "an unlimited rate limit has no algorithm or period")
	case rl.Unlimited:
	case rl.Unit != "" && rl.Sluice.Period != 0:
		d.fail(path+".unit", child(n, "unit"), "give a unit or sluice.period, not both")
	case rl.Unit == "" && rl.Sluice.Period == 0:
		d.fail(path+".unit", child(n, "unit"), "must be one of second, minute, hour, day, week, month or year (or set sluice.period)")
	case rl.Unit != "" && !validUnit:
		d.fail(path+".unit", child(n, "unit"), "invalid rate limit unit %q: one of second, minute, hour, day, week, month or year", rl.Unit)
	case !haveRequests || rl.RequestsPerUnit < 1:
		d.fail(path+".requests_per_unit", child(n, "requests_per_unit"), "must be at least 1, got %d", rl.RequestsPerUnit)
	case rl.RequestsPerUnit > 1<<32-1:
		d.fail(path+".requests_per_unit", child(n, "requests_per_unit"), "must fit 32 bits, got %d", rl.RequestsPerUnit)
	}
	if !rl.Unlimited {
		d.checkPeriods(path, n, rl)
	}
	return rl
}

// checkPeriods refuses two windows of one period: one limit per period.
func (d *decoder) checkPeriods(path string, n *yaml.Node, rl *RateLimit) {
	periods := map[time.Duration]bool{rl.period(): true}
	for i, l := range rl.Sluice.Limits {
		if periods[l.Period.Duration] {
			d.fail(fmt.Sprintf("%s.sluice.limits[%d].period", path, i), child(nth(child(child(n, "sluice"), "limits"), i), "period"), "%s is the period of another window of this rate limit", l.Period.Duration)
		}
		periods[l.Period.Duration] = true
	}
}

// period is the length of the limit's first window.
func (rl *RateLimit) period() time.Duration {
	if rl.Sluice.Period != 0 {
		return rl.Sluice.Period
	}
	return unitPeriods[rl.Unit]
}

func (d *decoder) limitSettings(path string, n *yaml.Node, s *LimitSettings) {
	var algorithm, period, leasing string
	d.fields(path, n, map[string]func(string, *yaml.Node){
		"algorithm": d.str(&algorithm),
		"period":    d.str(&period),
		"burst":     func(p string, v *yaml.Node) { d.scalar(p, v, &s.Burst) },
		"leasing":   d.str(&leasing),
		"limits": func(p string, v *yaml.Node) {
			d.list(p, v, func(at string, _ int, item *yaml.Node) {
				var l config.Limit
				var lp string
				d.fields(at, item, map[string]func(string, *yaml.Node){
					"requests": func(q string, x *yaml.Node) { d.scalar(q, x, &l.Requests) },
					"period":   d.str(&lp),
					"burst":    func(q string, x *yaml.Node) { d.scalar(q, x, &l.Burst) },
				})
				if l.Requests < 1 {
					d.fail(at+".requests", child(item, "requests"), "must be at least 1, got %d", l.Requests)
				}
				l.Period.Duration = d.period(at+".period", child(item, "period"), lp)
				if l.Burst < 0 {
					d.fail(at+".burst", child(item, "burst"), "must not be negative, got %d", l.Burst)
				}
				s.Limits = append(s.Limits, l)
			})
		},
	})
	if algorithm != "" {
		s.Algorithm = config.Algorithm(algorithm)
		d.oneOf(path+".algorithm", child(n, "algorithm"), s.Algorithm, config.Algorithms)
	}
	if period != "" {
		s.Period = d.period(path+".period", child(n, "period"), period)
	}
	if s.Burst < 0 {
		d.fail(path+".burst", child(n, "burst"), "must not be negative, got %d", s.Burst)
	}
	if leasing != "" {
		s.Leasing = config.Leasing(leasing)
		d.oneOf(path+".leasing", child(n, "leasing"), s.Leasing, config.Leasings)
	}
	if len(s.Limits)+1 > config.MaxWindows {
		d.fail(path+".limits", child(n, "limits"), "a rate limit has at most %d windows, got %d", config.MaxWindows, len(s.Limits)+1)
	}
}

// period reads a window's length: a Go duration, whole milliseconds.
func (d *decoder) period(path string, n *yaml.Node, s string) time.Duration {
	p := d.duration(path, n, s)
	if p != 0 && (p < time.Millisecond || p%time.Millisecond != 0) {
		d.fail(path, n, "must be a whole number of milliseconds, at least 1ms, got %s", s)
	}
	return p
}

func (d *decoder) duration(path string, n *yaml.Node, s string) time.Duration {
	if s == "" {
		d.fail(path, n, "must be a duration such as 1m or 50ms")
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.fail(path, n, "%q is not a duration such as 1m or 50ms", s)
	}
	return v
}

func (d *decoder) oneOf(path string, n *yaml.Node, value any, allowed any) {
	names := strings.Fields(strings.Trim(fmt.Sprint(allowed), "[]"))
	if !slices.Contains(names, fmt.Sprint(value)) {
		d.fail(path, n, "%q is not one of %s", value, strings.Join(names, ", "))
	}
}
