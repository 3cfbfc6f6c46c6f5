/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Algorithm is the way a rule counts requests.
// +kubebuilder:validation:Enum=TokenBucket;SlidingWindowLog;SlidingWindowCounter;FixedWindow;GCRA;Concurrency
type Algorithm string

const (
	// AlgorithmTokenBucket refills a bucket of burst tokens at requests per
	// period; it allows short bursts and smooths the long-run rate.
	AlgorithmTokenBucket Algorithm = "TokenBucket"
	// AlgorithmSlidingWindowLog remembers every request of the last period:
	// exact, but it stores one entry per request.
	AlgorithmSlidingWindowLog Algorithm = "SlidingWindowLog"
	// AlgorithmSlidingWindowCounter weighs the previous window's count by its
	// overlap with the sliding period: close to exact, two counters per tenant.
	AlgorithmSlidingWindowCounter Algorithm = "SlidingWindowCounter"
	// AlgorithmFixedWindow counts per calendar window aligned to the period
	// (every full minute for 1m); up to twice the limit can pass around a
	// window boundary.
	AlgorithmFixedWindow Algorithm = "FixedWindow"
	// AlgorithmGCRA (generic cell rate algorithm) spaces requests period /
	// requests apart and tolerates a burst: it admits what a token bucket of
	// the same limit admits, storing one timestamp per tenant, and its
	// Retry-After is exact.
	AlgorithmGCRA Algorithm = "GCRA"
	// AlgorithmConcurrency limits the requests a tenant has in flight at
	// once, across every enforcer of the policy (limits: [{concurrent: N}]):
	// a request holds cost slots from before it is forwarded until its
	// response ends.
	AlgorithmConcurrency Algorithm = "Concurrency"
)

// MaxSlidingWindowLogRequests bounds the requests of a SlidingWindowLog limit,
// which keeps one storage entry per request in its window.
const MaxSlidingWindowLogRequests = 100000

// Rule limits the requests it matches.
//
// Limits and tiers: for a request of tier T, a rule applies its limits for T;
// if it has none for T, its limits without a tier; if it has none of those
// either, its limits for the default tier (spec.tiers.default). All the limits
// that apply must allow the request, and they are checked together: a denial
// by one consumes nothing from the others.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.exempt) && self.exempt) || !has(self.limits)",messageExpression="'rule ' + self.name + ' is exempt, so it cannot have limits: remove limits, or set exempt to false'"
// +kubebuilder:validation:XValidation:rule="!(has(self.exempt) && self.exempt) || ((!has(self.algorithm) || self.algorithm == 'TokenBucket') && (!has(self.cost) || self.cost == 1) && !has(self.identity))",messageExpression="'rule ' + self.name + ' is exempt: the requests it matches are never limited, so algorithm, cost and identity have no effect; remove them'"
// +kubebuilder:validation:XValidation:rule="(has(self.exempt) && self.exempt) || has(self.limits)",messageExpression="'rule ' + self.name + ' has no limits: add at least one limit, or set exempt to true to let its requests through unlimited'"
// +kubebuilder:validation:XValidation:rule="self.algorithm in ['TokenBucket', 'GCRA'] || !has(self.limits) || self.limits.all(l, !has(l.burst))",messageExpression="'rule ' + self.name + ' uses ' + self.algorithm + ', which has no burst: remove burst from its limits, or use algorithm TokenBucket or GCRA'"
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(l, !has(l.requests) || l.requests < 1 || (has(l.burst) && l.burst < 1) || self.cost <= (has(l.burst) ? l.burst : l.requests))",messageExpression="'rule ' + self.name + ' has a cost higher than one of its limits allows per period (burst, or requests when burst is unset), so no request could ever pass: lower cost or raise that limit'"
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !self.limits.all(l, !has(l.period) || l.period.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')) || self.limits.all(a, !has(a.period) || self.limits.exists_one(b, has(b.period) && has(a.tier) == has(b.tier) && (!has(a.tier) || a.tier == b.tier) && duration(a.period) == duration(b.period)))",messageExpression="'rule ' + self.name + ' has two limits for the same tier and period: keep one, or change the period of the other'"
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(a, !has(a.calendar) || self.limits.exists_one(b, has(b.calendar) && has(a.tier) == has(b.tier) && (!has(a.tier) || a.tier == b.tier) && a.calendar.unit == b.calendar.unit))",messageExpression="'rule ' + self.name + ' has two limits for the same tier and calendar unit: keep one, or change the unit of the other'"
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.algorithm == 'FixedWindow' || self.limits.all(l, !has(l.calendar))",messageExpression="'rule ' + self.name + ' uses ' + self.algorithm + ', which cannot count calendar windows exactly: set algorithm to FixedWindow, or give its limits a period instead of a calendar'"
// +kubebuilder:validation:XValidation:rule="self.algorithm != 'SlidingWindowLog' || !has(self.limits) || self.limits.all(l, !has(l.requests) || l.requests <= 100000)",messageExpression="'rule ' + self.name + ' uses SlidingWindowLog, which stores one entry per request: keep each limit at or below 100000 requests per period, or use SlidingWindowCounter'"
// +kubebuilder:validation:XValidation:rule="!has(self.onLimit) || !has(self.onLimit.delay) || !(has(self.exempt) && self.exempt)",messageExpression="'rule ' + self.name + ' is exempt: its requests are never limited, so onLimit.delay has nothing to delay; remove it'"
// +kubebuilder:validation:XValidation:rule="!has(self.onLimit) || !has(self.onLimit.delay) || (has(self.exempt) && self.exempt) || self.algorithm in ['TokenBucket', 'GCRA', 'Concurrency']",messageExpression="'rule ' + self.name + ' uses ' + self.algorithm + ', which cannot book future capacity exactly: remove onLimit.delay, or use algorithm TokenBucket, GCRA or Concurrency'"
// +kubebuilder:validation:XValidation:rule="!has(self.ban) || !(has(self.exempt) && self.exempt)",messageExpression="'rule ' + self.name + ' is exempt, so it cannot have a ban: remove ban, or set exempt to false'"
// +kubebuilder:validation:XValidation:rule="!has(self.ban) || self.ban.durations.all(d, d.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(d) >= duration('1s') && duration(d) <= duration('744h'))",messageExpression="'rule ' + self.name + ' has a ban duration that is not a duration between 1s and 744h (31 days), such as 5m, 1h or 24h'"
// +kubebuilder:validation:XValidation:rule="!has(self.ban) || (self.ban.after.within.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self.ban.after.within) >= duration('1s') && duration(self.ban.after.within) <= duration('24h'))",messageExpression="'rule ' + self.name + ' has a ban whose after.within is not a duration between 1s and 24h, such as 1m'"
// +kubebuilder:validation:XValidation:rule="!has(self.ban) || !has(self.ban.forgetAfter) || (self.ban.forgetAfter.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self.ban.forgetAfter) >= duration('1s') && duration(self.ban.forgetAfter) <= duration('744h'))",messageExpression="'rule ' + self.name + ' has a ban whose forgetAfter is not a duration between 1s and 744h (31 days), such as 24h'"
// +kubebuilder:validation:XValidation:rule="!(has(self.exempt) && self.exempt) || !has(self.adaptive)",messageExpression="'rule ' + self.name + ' is exempt, so it has no limits to adapt: remove adaptive, or set exempt to false'"
// +kubebuilder:validation:XValidation:rule="!(has(self.exempt) && self.exempt) || (!has(self.responseCost) && !has(self.countResponses))",messageExpression="'rule ' + self.name + ' is exempt, so nothing is charged for its answers: remove responseCost and countResponses, or set exempt to false'"
// +kubebuilder:validation:XValidation:rule="!has(self.responseCost) || self.algorithm != 'SlidingWindowLog'",messageExpression="'rule ' + self.name + ' uses SlidingWindowLog, which stores one entry per request and cannot charge a cost after the answer: remove responseCost, or use algorithm FixedWindow, TokenBucket, GCRA or SlidingWindowCounter'"
// +kubebuilder:validation:XValidation:rule="!has(self.responseCost) || !has(self.countResponses)",messageExpression="'rule ' + self.name + ' sets both responseCost and countResponses: keep one of them (a rule charges either what the answer reports, or its cost for the answers that match)'"
// +kubebuilder:validation:XValidation:rule="!has(self.responseCost) || !has(self.responseCost.unfinishedCost) || self.responseCost.unfinishedCost >= self.cost",messageExpression="'rule ' + self.name + ' has responseCost.unfinishedCost below its cost: an answer whose report cannot be read is charged at least the cost; raise unfinishedCost or leave it unset'"
// +kubebuilder:validation:XValidation:rule="!has(self.responseCost) || !has(self.onLimit)",messageExpression="'rule ' + self.name + ' sets responseCost and onLimit.delay, but a delay books the cost before the answer reports it: remove onLimit, or remove responseCost'"
// +kubebuilder:validation:XValidation:rule="self.algorithm != 'Concurrency' || !has(self.limits) || self.limits.all(l, has(l.concurrent) && !has(l.requests) && !has(l.period) && !has(l.calendar) && !has(l.burst))",messageExpression="'rule ' + self.name + ' uses Concurrency, which limits the requests a tenant has in flight at once: give each of its limits concurrent (such as concurrent: 4) and remove requests, period and burst from them'"
// +kubebuilder:validation:XValidation:rule="self.algorithm == 'Concurrency' || !has(self.limits) || self.limits.all(l, has(l.requests) && (has(l.period) || has(l.calendar)) && !has(l.concurrent))",messageExpression="'rule ' + self.name + ' uses ' + self.algorithm + ', which counts requests per period: give each of its limits requests and a period or calendar, and remove concurrent, which is for algorithm Concurrency'"
// +kubebuilder:validation:XValidation:rule="self.algorithm != 'Concurrency' || !has(self.limits) || self.limits.all(a, self.limits.exists_one(b, has(a.tier) == has(b.tier) && (!has(a.tier) || a.tier == b.tier)))",messageExpression="'rule ' + self.name + ' uses Concurrency and has two limits for the same tier: keep one concurrent limit per tier'"
// +kubebuilder:validation:XValidation:rule="self.algorithm != 'Concurrency' || !has(self.limits) || self.limits.all(l, !has(l.concurrent) || self.cost <= l.concurrent)",messageExpression="'rule ' + self.name + ' has a cost higher than one of its concurrent limits, so no request could ever hold its slots: lower cost or raise concurrent'"
// +kubebuilder:validation:XValidation:rule="self.algorithm != 'Concurrency' || !has(self.adaptive)",messageExpression="'rule ' + self.name + ' uses Concurrency, which adaptive cannot scale: remove adaptive, or limit the rate with another algorithm'"
// +kubebuilder:validation:XValidation:rule="self.algorithm != 'Concurrency' || (!has(self.responseCost) && !has(self.countResponses))",messageExpression="'rule ' + self.name + ' uses Concurrency, which holds slots while a request runs and charges nothing after it: remove responseCost and countResponses, or limit the rate with another algorithm'"
type Rule struct {
	// Name identifies the rule in overrides, headers, metrics and 429 bodies:
	// lowercase letters, digits and '-', at most 63 characters.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Match selects the requests this rule applies to. Omitted or empty, it
	// matches every request.
	// +optional
	Match *RequestMatch `json:"match,omitempty"`

	// Exempt lets the matched requests through unlimited, whatever other rules
	// of this policy they match. An exempt rule has no limits.
	// +optional
	Exempt bool `json:"exempt,omitempty"`

	// Algorithm counts the requests: TokenBucket (smooth rate with bursts),
	// GCRA (the token bucket's behaviour in one timestamp per tenant),
	// SlidingWindowLog (exact, one stored entry per request),
	// SlidingWindowCounter (close to exact, constant memory), FixedWindow
	// (cheapest; up to twice the limit around a window boundary) or
	// Concurrency (requests in flight at once, not per period).
	// +kubebuilder:default=TokenBucket
	// +optional
	Algorithm Algorithm `json:"algorithm,omitempty"`

	// Limits are the budgets of each tenant; a request must fit in all that
	// apply to its tier. A limit without a tier applies to the tiers this rule
	// does not name.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Limits []Limit `json:"limits,omitempty"`

	// Cost is how many requests each matched request counts for, to weigh
	// expensive endpoints.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Cost int32 `json:"cost,omitempty"`

	// Leasing lets each enforcer take a busy tenant's units from Redis a few
	// at a time and admit from them locally (Auto, for TokenBucket, GCRA and
	// FixedWindow), and refuse locally until the Retry-After Redis gave.
	// Every admitted request was counted in Redis first, so the limit holds
	// across replicas. Off sends every decision to Redis.
	// +kubebuilder:default=Auto
	// +optional
	Leasing Leasing `json:"leasing,omitempty"`

	// Identity replaces spec.identity for this rule (as a whole: sources and
	// partitionBy).
	// +optional
	Identity *Identity `json:"identity,omitempty"`

	// OnLimit says what to do with a request over the limit instead of
	// refusing it at once: delay it until capacity comes, up to a bound.
	// +optional
	OnLimit *OnLimit `json:"onLimit,omitempty"`
	// Ban shuts out, for a while, a tenant that keeps hitting this rule's
	// limits, with escalating durations.
	// +optional
	Ban *Ban `json:"ban,omitempty"`

	// Adaptive scales this rule's limits with the application's measured
	// latency and error rate, between adaptive.minimum and 100%.
	// +optional
	Adaptive *Adaptive `json:"adaptive,omitempty"`

	// ResponseCost charges each request what the application reports in
	// its answer (a header, or the usage of a JSON answer) instead of the
	// rule's cost alone; cost is charged up front, the difference when the
	// answer ends. Not for SlidingWindowLog rules.
	// +optional
	ResponseCost *ResponseCost `json:"responseCost,omitempty"`

	// CountResponses counts only the requests whose answer has one of the
	// listed statuses, such as the failed attempts of a login; the others
	// are given back when their answer comes.
	// +optional
	CountResponses *CountResponses `json:"countResponses,omitempty"`
}

// Leasing says whether an enforcer may decide a rule's requests on its own,
// exactly: admit from units it took from Redis ahead of time, and refuse
// while Redis said no until a known time.
// +kubebuilder:validation:Enum=Auto;Off
type Leasing string

const (
	// LeasingAuto leases for TokenBucket, GCRA and FixedWindow rules, sized
	// by each tenant's traffic; sliding windows decide every request in Redis.
	LeasingAuto Leasing = "Auto"
	// LeasingOff sends every decision to Redis.
	LeasingOff Leasing = "Off"
)

// Limit is a budget of requests per period, or per calendar window, for
// each tenant.
// +kubebuilder:validation:XValidation:rule="has(self.concurrent) || has(self.period) != has(self.calendar)",message="a limit needs exactly one of period (a duration such as 1h) or calendar (such as {unit: Month, timeZone: Europe/Berlin}): set one, and remove the other"
type Limit struct {
	// Tier restricts the limit to requests of this tier (see spec.tiers).
	// Omitted, the limit applies to every tier the rule has no limit for.
	// Override limits cannot name a tier.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?$`
	// +optional
	Tier string `json:"tier,omitempty"`

	// Requests is how many requests (times the rule's cost) a tenant may make
	// per period. Required, except for Concurrency rules, which set
	// concurrent instead.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000000
	// +optional
	Requests int64 `json:"requests,omitempty"`

	// Period is the window of the limit, a Go duration of whole seconds
	// between 1s and 744h (31 days), such as 1m, 1h or 24h, aligned to the
	// Unix epoch (24h resets at midnight UTC). Durations have no day unit:
	// write 24h for a day. Set period or calendar, not both; neither for
	// Concurrency rules.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="period must be a duration such as 30s, 1m, 1h or 24h; there is no day unit: write 24h for a day"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('744h'))",message="period must be between 1s and 744h (31 days), for example 1m, 1h or 24h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) < duration('1s') || duration(self).getMilliseconds() % 1000 == 0",message="period must be a whole number of seconds, for example 1s or 90s"
	// +optional
	Period metav1.Duration `json:"period,omitzero"`

	// Calendar aligns the window to the calendar of a time zone instead of
	// a period: {unit: Month, timeZone: Europe/Berlin} resets at midnight
	// of every 1st in Berlin. FixedWindow rules only. Set period or
	// calendar, not both.
	// +optional
	Calendar *Calendar `json:"calendar,omitempty"`

	// Burst is the size of the token bucket: how many requests a tenant may
	// make at once after being idle. TokenBucket and GCRA rules only; it
	// defaults to requests.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000000
	// +optional
	Burst *int64 `json:"burst,omitempty"`

	// Concurrent is how many requests (times the rule's cost) a tenant may
	// have in flight at once, across every enforcer of the policy.
	// Concurrency rules only, instead of requests and period.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Concurrent int64 `json:"concurrent,omitempty"`
}

// RequestMatch selects requests by host, method and path. A request matches
// when it matches every list that is set, and one entry of each; paths and
// grpc count as one list: the request's path matches an entry of either.
// The rules of a rateLimitService policy match descriptors instead.
// +kubebuilder:validation:XValidation:rule="!has(self.grpc) || size(self.grpc) == 0 || !has(self.methods) || size(self.methods) == 0 || 'POST' in self.methods",message="gRPC calls are POST requests, so the grpc entries of a match whose methods leave out POST match nothing: add POST to methods, remove methods, or put the gRPC calls in a rule of their own"
type RequestMatch struct {
	// Hosts the request is for (the Host header without its port, compared
	// case-insensitively): exact lowercase names such as api.example.com, or
	// wildcards such as *.example.com, which match any subdomain but not
	// example.com itself.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(h, h.matches('^([*][.])?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))",message="hosts must be lowercase DNS names such as api.example.com, or wildcards such as *.example.com"
	// +optional
	Hosts []string `json:"hosts,omitempty"`

	// Methods the request uses.
	// +listType=set
	// +kubebuilder:validation:MaxItems=9
	// +optional
	Methods []HTTPMethod `json:"methods,omitempty"`

	// Paths the request is for, compared with the URL path after it has been
	// cleaned (no query string, no dot segments, no repeated slashes).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Paths []PathMatch `json:"paths,omitempty"`

	// GRPC names gRPC calls: a service, and optionally one of its methods.
	// It is shorthand for paths: service shop.v1.Orders with method Create
	// is the exact path /shop.v1.Orders/Create, and without a method the
	// prefix /shop.v1.Orders/ (every method of the service). gRPC calls are
	// POST requests: leave methods unset, or include POST.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	GRPC []GRPCMatch `json:"grpc,omitempty"`

	// Descriptors is, in a rateLimitService policy and only there, the
	// descriptor this rule matches: its entries, in the order Envoy's rate
	// limit actions write them. Matching is envoyproxy/ratelimit's: a
	// descriptor walks the rules of its domain entry by entry, taking at
	// each level the rule entry with its key and value, else the first
	// (in rule order) whose value is a wildcard that matches, else the one
	// with its key and no value; the rule whose entries the walk ends on
	// decides the descriptor, and a descriptor no rule decides is admitted.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Descriptors []DescriptorEntryMatch `json:"descriptors,omitempty"`
}

// DescriptorEntryMatch matches one entry of a descriptor.
type DescriptorEntryMatch struct {
	// Key of the entry, such as generic_key, remote_address or a key of
	// Envoy's request_headers action.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
	// Value the entry must have. Omitted, any value matches. A * in it
	// matches any run of characters: files* matches files and files/a.pdf,
	// *.pdf matches a.pdf.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Value string `json:"value,omitempty"`
}

// GRPCMatch names the calls of one gRPC service, or of one of its methods,
// as they appear in the request path: /<service>/<method>.
type GRPCMatch struct {
	// Service is the fully qualified name of the service, its proto package
	// and name, such as shop.v1.Orders.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)*$')",message="service must be a fully qualified gRPC service name such as shop.v1.Orders: identifiers (letters, digits and _, not starting with a digit) separated by dots, without a leading /"
	Service string `json:"service"`

	// Method is the name of one method of the service, such as Create.
	// Omitted, the match covers every method of the service.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="method must be the name of a gRPC method such as Create: letters, digits and _, not starting with a digit, without the service or a /"
	// +optional
	Method string `json:"method,omitempty"`
}

// HTTPMethod is an HTTP request method.
// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE;OPTIONS;CONNECT;TRACE
type HTTPMethod string

// PathMatch matches the URL path in exactly one way. Paths are case-sensitive.
// +kubebuilder:validation:XValidation:rule="(has(self.exact) ? 1 : 0) + (has(self.prefix) ? 1 : 0) + (has(self.glob) ? 1 : 0) == 1",message="a path match sets exactly one of exact, prefix or glob"
type PathMatch struct {
	// Exact matches this path only.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="exact paths start with /"
	// +optional
	Exact string `json:"exact,omitempty"`

	// Prefix matches this path and the paths below it, segment by segment:
	// /v1/exports matches /v1/exports and /v1/exports/42, not /v1/exportsx.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path prefixes start with /"
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Glob matches paths segment by segment: * matches any part of one
	// segment and ** (a whole segment) matches zero or more segments, so
	// /v1/users/*/orders/** matches /v1/users/42/orders and
	// /v1/users/42/orders/7/items.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path globs start with /"
	// +kubebuilder:validation:XValidation:rule="!self.matches('[^/][*][*]|[*][*][^/]')",message="** must be a whole path segment, as in /v1/**/items; use * inside a segment"
	// +optional
	Glob string `json:"glob,omitempty"`
}
