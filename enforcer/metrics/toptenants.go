package metrics

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/enforcer/topk"
)

const (
	// topTenantsCapacity is how many tenants each rule's sketches hold:
	// memory is fixed whatever the number of tenants (docs/kubectl-plugin.md).
	topTenantsCapacity = 32
	// topTenantsReported is how many tenants of each rule /status lists.
	topTenantsReported = 10
	// topTenantsWindow is how long one generation of sketches counts;
	// /status reports the last complete generation and the current one.
	topTenantsWindow = time.Minute
	// maxTenantName bounds a tenant name kept in a sketch.
	maxTenantName = 128
)

// TopTenants keeps, per rule, the heaviest and the most refused tenants in
// Space-Saving sketches of fixed size. It is safe for concurrent use.
type TopTenants struct {
	now   func() time.Time
	mu    sync.RWMutex
	rules map[ruleKey]*ruleTop
}

type ruleKey struct{ policy, rule string }

type ruleTop struct {
	mu      sync.Mutex
	hashes  bool // the rule reads a JWT claim: names are hashed
	started time.Time
	// cur counts now, prev the generation before.
	cur, prev [2]*topk.Sketch // requests, refused
}

// NewTopTenants is an empty TopTenants.
func NewTopTenants() *TopTenants {
	return &TopTenants{now: time.Now, rules: map[ruleKey]*ruleTop{}}
}

// Tenant counts one decision of r for tenant.
func (t *TopTenants) Tenant(p *rules.Policy, r *rules.Rule, tenant string, v engine.Verdict) {
	if t == nil || tenant == "" {
		return
	}
	k := ruleKey{p.Name, r.Name}
	t.mu.RLock()
	rt := t.rules[k]
	t.mu.RUnlock()
	if rt == nil {
		rt = t.add(k, r)
	}
	now := t.now()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.rotate(now)
	name := keptName(tenant, rt.hashes)
	rt.cur[0].Add(name, 1)
	if v != engine.Allowed {
		rt.cur[1].Add(name, 1)
	}
}

func (t *TopTenants) add(k ruleKey, r *rules.Rule) *ruleTop {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rt := t.rules[k]; rt != nil {
		return rt
	}
	rt := &ruleTop{started: t.now()}
	for _, s := range r.Identity.Sources {
		rt.hashes = rt.hashes || s.JWTClaim != nil
	}
	for i := range rt.cur {
		rt.cur[i], rt.prev[i] = topk.New(topTenantsCapacity), topk.New(topTenantsCapacity)
	}
	t.rules[k] = rt
	return rt
}

// rotate starts a new generation when the current one is a window old.
func (rt *ruleTop) rotate(now time.Time) {
	switch age := now.Sub(rt.started); {
	case age >= 2*topTenantsWindow:
		for i := range rt.cur {
			rt.cur[i].Reset()
			rt.prev[i].Reset()
		}
		rt.started = now
	case age >= topTenantsWindow:
		rt.cur, rt.prev = rt.prev, rt.cur
		for i := range rt.cur {
			rt.cur[i].Reset()
		}
		rt.started = rt.started.Add(topTenantsWindow)
	}
}

// keptName is how a sketch keeps a tenant: as it is, hashed only at
// Report for the few a report lists, so that a decision pays no hash; a
// value too long to keep is hashed (a rule that hashes) or cut here.
func keptName(tenant string, hash bool) string {
	if len(tenant) <= maxTenantName {
		return tenant
	}
	return tenantName(tenant, hash)
}

// tenantName is how a tenant is shown: API keys are already
// "sha256:<hex>", IP addresses and header values as they are, a JWT claim
// hashed as an API key is; long values cut.
func tenantName(tenant string, hash bool) string {
	if hash && !strings.HasPrefix(tenant, "sha256:") && tenant != "anonymous" && tenant != "shared" {
		if _, err := netip.ParseAddr(tenant); err != nil {
			sum := sha256.Sum256([]byte(tenant))
			return "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	if len(tenant) > maxTenantName {
		return tenant[:maxTenantName]
	}
	return tenant
}

// Report is the top tenants of every rule seen, for /status, sorted by
// policy and rule.
func (t *TopTenants) Report() []status.TopTenants {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	keys := make([]ruleKey, 0, len(t.rules))
	for k := range t.rules {
		keys = append(keys, k)
	}
	t.mu.RUnlock()
	slices.SortFunc(keys, func(a, b ruleKey) int {
		if c := strings.Compare(a.policy, b.policy); c != 0 {
			return c
		}
		return strings.Compare(a.rule, b.rule)
	})
	now := t.now()
	var out []status.TopTenants
	for _, k := range keys {
		t.mu.RLock()
		rt := t.rules[k]
		t.mu.RUnlock()
		rt.mu.Lock()
		rt.rotate(now)
		heaviest := topk.Merge(topTenantsReported, rt.cur[0].Top(-1), rt.prev[0].Top(-1))
		refused := topk.Merge(topTenantsReported, rt.cur[1].Top(-1), rt.prev[1].Top(-1))
		rt.mu.Unlock()
		if len(heaviest) == 0 {
			continue
		}
		out = append(out, status.TopTenants{Policy: k.policy, Rule: k.rule,
			Heaviest: counts(heaviest, rt.hashes), Refused: counts(refused, rt.hashes)})
	}
	return out
}

func counts(items []topk.Item, hash bool) []status.TenantCount {
	out := make([]status.TenantCount, len(items))
	for i, it := range items {
		out[i] = status.TenantCount{Tenant: tenantName(it.Key, hash), Count: it.Count, Error: it.Error}
	}
	return out
}

// Tenant makes Metrics a engine.TenantRecorder: the proxy reports each
// rule's tenant to the top tenants /status lists.
func (m *Metrics) Tenant(p *rules.Policy, r *rules.Rule, tenant string, v engine.Verdict) {
	m.top.Tenant(p, r, tenant, v)
}

// TopTenants reports the heaviest and most refused tenants of each rule,
// as /status lists them.
func (m *Metrics) TopTenants() []status.TopTenants { return m.top.Report() }
