// Package debugapi holds the documents of the enforcer's admin API that
// reveal or change a tenant's state (/debug/tenant, /bans, /tenant): the
// admin server writes them, kubectl-sluice and sluice-ratelimit read or
// write them. A leaf: it links no Redis client and no data plane.
package debugapi

import (
	"encoding/json"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// TenantReport is what /debug/tenant answers without a rule: every limited
// rule a request of the tenant would be checked against, and whether such
// a request would be refused now, as the proxy would refuse it.
type TenantReport struct {
	Tenant string `json:"tenant"`
	// Refused says whether the proxy would answer a request of the tenant
	// 429 now: a rule of a policy in Enforce mode refuses it.
	Refused bool `json:"refused"`
	// RetryAfterSeconds is the Retry-After of that 429, and RefusedBy the
	// rule it names (of the refusing rules, the one with the longest
	// wait). Both are absent when nothing refuses.
	RetryAfterSeconds int64    `json:"retryAfterSeconds,omitempty"`
	RefusedBy         *RuleRef `json:"refusedBy,omitempty"`
	// WouldDeny says a rule of a policy in DryRun mode would refuse: the
	// request goes through, counted as would-deny.
	WouldDeny bool `json:"wouldDeny,omitempty"`
	// ExemptBy are the exempt rules that let the request through their
	// policy, whose limited rules are then not listed.
	ExemptBy []RuleRef     `json:"exemptBy,omitempty"`
	Rules    []TenantUsage `json:"rules"`
}

// RuleRef names one rule of one policy.
type RuleRef struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
}

// TenantUsage is the state of one tenant's bucket under one rule, read
// without consuming anything, as the proxy would decide a request of the
// tenant now.
type TenantUsage struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	// Tier is the tier the request resolves to, and TierReason how: from
	// which header or claim, or the policy's default and why.
	Tier       string `json:"tier,omitempty"`
	TierReason string `json:"tierReason,omitempty"`
	Algorithm  string `json:"algorithm"`
	// Cost is what one request takes from every window.
	Cost int64 `json:"cost"`
	// Override is set when the tenant has limits of its own.
	Override bool `json:"override"`
	// DryRun is set for a policy in DryRun mode: it never refuses, a
	// refusal of its rule is counted as would-deny.
	DryRun bool `json:"dryRun,omitempty"`
	// Windows are the rule's windows for the tenant, each with its state.
	Windows []WindowUsage `json:"windows"`
	// Allowed says whether one more request would be admitted now (after
	// waiting DelaySeconds, for a rule with onLimit.delay); a banned
	// tenant is not.
	Allowed bool `json:"allowed"`
	// Limit, Remaining and Reset describe the deciding window, as the
	// X-RateLimit-* headers would: the refusing window with the longest
	// wait, else the one with the fewest requests remaining.
	Limit     int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
	// RetryAfterSeconds is present when the rule would refuse: the
	// Retry-After its 429 would carry (whole seconds, rounded up, at
	// least 1), a ban's end included.
	RetryAfterSeconds int64 `json:"retryAfterSeconds,omitempty"`
	// DelaySeconds is how long an admitted request would wait for the
	// capacity it books (onLimit.delay), absent when it goes on at once.
	DelaySeconds float64 `json:"delaySeconds,omitempty"`
	// Reservations are the rule's onLimit.delay bookings (delay_debug.go),
	// omitted for rules without a delay.
	Reservations *Reservations `json:"reservations,omitempty"`
	// Ban is the tenant's ban state, for a rule with a ban.
	Ban *TenantBan `json:"ban,omitempty"`
	// Slots are, for a Concurrency rule, the enforcers holding the
	// tenant's slots, by name (debug_slots.go).
	Slots []SlotHolder `json:"slots,omitempty"`
	// Adaptive is set for an adaptive rule: the factor that scaled Windows.
	Adaptive *TenantAdaptive `json:"adaptive,omitempty"`
	// Error says why the bucket could not be read, in a TenantReport.
	Error string `json:"error,omitempty"`

	// RetryAfter is the unrounded wait, to pick the rule a 429 names; not
	// part of the document.
	RetryAfter time.Duration `json:"-"`
}

// WindowUsage is one window of a rule and its state for the tenant.
type WindowUsage struct {
	config.Limit
	// Capacity ("limit") is the most the window admits at once (a token
	// bucket's burst), Remaining what it admits now and Reset when it is
	// whole again.
	Capacity  int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
	// Refusing says this window alone would refuse the request now.
	Refusing bool `json:"refusing,omitempty"`
	// Current is, for a calendar window, the window that holds now on
	// Redis' clock, in its zone (calendar_debug.go).
	Current *CalendarWindow `json:"current,omitempty"`
	// Debt is how far below empty the costs its answers reported took
	// the window (responseCost rules), which it pays before it admits.
	Debt int64 `json:"debt,omitempty"`
}

// MarshalJSON writes the window with the fields its kind has: a calendar
// window has no period, a Concurrency window neither requests nor period
// (a zero would read as a limit of nothing).
func (w WindowUsage) MarshalJSON() ([]byte, error) {
	type fields WindowUsage // without this method
	var period *config.Duration
	if w.Period.Duration != 0 {
		period = &w.Period
	}
	return json.Marshal(struct {
		fields
		Requests int64            `json:"requests,omitempty"`
		Period   *config.Duration `json:"period,omitempty"`
	}{fields(w), w.Requests, period})
}

// CalendarWindow is the current window of a calendar limit, its bounds
// written in the calendar's zone (2026-03-01T00:00:00+01:00), and its
// length, which varies with the month and daylight-saving changes.
type CalendarWindow struct {
	TimeZone string    `json:"timeZone"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Seconds  int64     `json:"seconds"`
}

// Reservations is what /debug/tenant shows of the delay for a rule
// that has it: the units booked ahead in Redis by every enforcer, read from
// the deciding window, and the tenant's requests waiting in this one.
type Reservations struct {
	// Booked are the units the window has handed out beyond what it holds
	// now: requests of any enforcer admitted to wait for them.
	Booked int64 `json:"booked"`
	// Until is when the last booked unit is due, omitted when none is.
	Until *time.Time `json:"until,omitempty"`
	// Waiting are the tenant's requests holding a place in this
	// enforcer's wait queue, and LatestSlot the latest slot one of them
	// waits for.
	Waiting    int        `json:"waiting"`
	LatestSlot *time.Time `json:"latestSlot,omitempty"`
}

// BanList is what GET /bans answers: the tenants banned now under the
// rules asked for.
type BanList struct {
	Policy string    `json:"policy"`
	Bans   []BanItem `json:"bans"`
}

// BanItem is one banned tenant of one rule. Tenant is the salted hash
// Redis keys use (raw identities are never stored): pass it back as
// tenantHash to lift the ban.
type BanItem struct {
	Rule   string    `json:"rule"`
	Tenant string    `json:"tenantHash"`
	Until  time.Time `json:"until"`
	Level  int64     `json:"level"`
}

// BanLift is what DELETE /bans answers.
type BanLift struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Tenant string `json:"tenantHash"`
	// Lifted is false when the tenant was not banned (its level and
	// logged refusals are forgotten all the same).
	Lifted bool `json:"lifted"`
}

// TenantBan is a tenant's ban state in /debug/tenant.
type TenantBan struct {
	Banned bool `json:"banned"`
	// Level is the current ban's level, or the last one's while it is
	// remembered (forgetAfter); 0 when none is.
	Level int64 `json:"level"`
	// Until and RemainingSeconds say when the ban in force ends.
	Until            *time.Time `json:"until,omitempty"`
	RemainingSeconds float64    `json:"remainingSeconds,omitempty"`
	// RecentDenials are the refusals counted toward the next ban, of the
	// denials within the rule's ban.after.within that start one.
	RecentDenials int64 `json:"recentDenials"`
	Denials       int64 `json:"denials"`
}

// TenantAdaptive is the adaptive state next to a tenant's bucket: the
// factor in force and the windows it scales.
type TenantAdaptive struct {
	// Factor is the share of the configured limits in force, as "70%".
	Factor string `json:"factor"`
	// Configured are the windows before scaling; TenantUsage.Windows are
	// the ones in force.
	Configured []config.Limit `json:"configured"`
}

// TenantReset is what DELETE /tenant answers.
type TenantReset struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	// Tenant is the salted hash Redis keys use, as GET /bans lists it.
	Tenant string `json:"tenantHash"`
	// Deleted is how many of the bucket's keys existed: 0 when the tenant
	// had no state under the rule's current windows.
	Deleted int64 `json:"deleted"`
}

// SlotHolder is an enforcer holding Concurrency slots of a tenant's bucket.
type SlotHolder struct {
	Enforcer string    `json:"enforcer"`
	Slots    int64     `json:"slots"`
	Expires  time.Time `json:"expires"`
	// Local is set for this enforcer's LocalFallback slots, which Redis
	// does not count.
	Local bool `json:"local,omitempty"`
}
