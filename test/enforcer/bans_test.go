package enforcer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// banProblem is the problem+json body of a banned tenant's refusal.
type banProblem struct {
	problem
	Ban struct {
		Until   time.Time `json:"until"`
		Level   int64     `json:"level"`
		Denials int64     `json:"denials"`
		Within  string    `json:"within"`
	} `json:"ban"`
}

func bannedBody(g Gomega, r response) banProblem {
	g.Expect(r.status).To(Equal(429), r.body)
	refusal(g, r)
	var p banProblem
	g.Expect(json.Unmarshal([]byte(r.body), &p)).To(Succeed())
	g.Expect(p.Type).To(Equal("https://sluice.dev/problems/banned"), r.body)
	return p
}

// loginPolicy is the login rule of the samples with short durations: 2
// requests per second, banned after 3 refusals within a minute.
func loginPolicy(name, durations, forgetAfter string) string {
	return policy(name, fmt.Sprintf(`  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: login
      match: {methods: [POST], paths: [{exact: /login}]}
      algorithm: SlidingWindowLog
      limits: [{requests: 2, period: 1s}]
      ban:
        after: {denials: 3, within: 1m}
        durations: [%s]
        forgetAfter: %s`, durations, forgetAfter))
}

// tenantOf is a tenant header of the test's own, also when run again.
func tenantOf(t *testing.T, name string) string {
	return "X-Tenant-ID: " + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// banTenant makes 2 admitted requests and 3 refused ones of tenant on e:
// the third refusal starts a ban, whose answer it returns.
func banTenant(t *testing.T, g Gomega, e *instance, tenant string) banProblem {
	t.Helper()
	for i := range 2 {
		g.Expect(do(t, http.MethodPost, e.url+"/login", tenant).status).To(Equal(200), "request %d fits the limit", i+1)
	}
	for i := range 2 {
		r := do(t, http.MethodPost, e.url+"/login", tenant)
		g.Expect(r.status).To(Equal(429))
		g.Expect(refusal(g, r).Type).To(Equal("https://sluice.dev/problems/rate-limited"), "refusal %d of 3 is not a ban yet", i+1)
	}
	return bannedBody(g, do(t, http.MethodPost, e.url+"/login", tenant))
}

func TestBanStartsAfterExactlyNDenialsOutlastsTheWindowAndEscalates(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: loginPolicy("auth", "3s, 6s", "1m")})
	tenant, other := tenantOf(t, "mallory"), tenantOf(t, "alice")

	p := banTenant(t, g, e, tenant)
	g.Expect(p.Policy).To(Equal("auth"))
	g.Expect(p.Rule).To(Equal("login"))
	g.Expect(p.Ban.Level).To(Equal(int64(1)))
	g.Expect(p.Ban.Denials).To(Equal(int64(3)))
	g.Expect(p.Ban.Within).To(Equal("1m"))
	g.Expect(p.Ban.Until).To(BeTemporally("~", time.Now().Add(3*time.Second), 2*time.Second))
	g.Expect(p.RetryAfter).To(BeNumerically("~", 3, 1))
	g.Expect(p.Detail).To(ContainSubstring("until " + p.Ban.Until.Format(time.RFC3339)))

	// the limit's window (1s) ends; the ban does not
	time.Sleep(1200 * time.Millisecond)
	r := do(t, http.MethodPost, e.url+"/login", tenant)
	bannedBody(g, r)
	g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("2"))
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
	g.Expect(do(t, http.MethodPost, e.url+"/login", other).status).To(Equal(200), "another tenant is not banned")
	g.Expect(get(t, e.url+"/login", tenant).status).To(Equal(200), "a GET is not the rule's: the ban is the rule's only")

	// once the ban ends the tenant is admitted again
	g.Eventually(func() int { return do(t, http.MethodPost, e.url+"/login", tenant).status }, 5*time.Second, 250*time.Millisecond).Should(Equal(200))
	time.Sleep(1100 * time.Millisecond) // a fresh window
	p = banTenant(t, g, e, tenant)
	g.Expect(p.Ban.Level).To(Equal(int64(2)), "a second ban within forgetAfter")
	g.Expect(p.RetryAfter).To(BeNumerically("~", 6, 1), "the second duration")

	g.Expect(metricValue(t, e, "sluice_enforcer_bans_started_total", `policy="auth"`, `rule="login"`, `level="1"`)).To(Equal(1.0))
	g.Expect(metricValue(t, e, "sluice_enforcer_bans_started_total", `policy="auth"`, `level="2"`)).To(Equal(1.0))
	g.Expect(metricValue(t, e, "sluice_enforcer_decisions_total", `policy="auth"`, `decision="banned"`)).To(BeNumerically(">=", 3))
	g.Expect(metricValue(t, e, "sluice_enforcer_decisions_total", `policy="auth"`, `decision="denied"`)).To(Equal(4.0),
		"refusals by the limit only: two before each ban")
}

func TestBanLevelsDecayAfterForgetAfter(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: loginPolicy("auth", "1s, 1h", "1s")})
	tenant := tenantOf(t, "mallory")
	g.Expect(banTenant(t, g, e, tenant).Ban.Level).To(Equal(int64(1)))
	time.Sleep(1000*time.Millisecond + 1500*time.Millisecond) // the ban, then more than forgetAfter
	p := banTenant(t, g, e, tenant)
	g.Expect(p.Ban.Level).To(Equal(int64(1)), "the first ban is forgotten")
	g.Expect(p.RetryAfter).To(BeNumerically("<=", 2))
}

func TestBanSurvivesARestartAndCostsNoRedisCallWhileCached(t *testing.T) {
	g := NewWithT(t)
	policies := loginPolicy("auth", "1h", "24h")
	e := start(t, setup{policies: policies})
	tenant := tenantOf(t, "mallory")
	banTenant(t, g, e, tenant)

	calls := metricValue(t, e, "sluice_enforcer_redis_calls_total", `policy="auth"`)
	for range 30 {
		bannedBody(g, do(t, http.MethodPost, e.url+"/login", tenant))
	}
	// the ban's start records it in the rule's index (one call, maybe
	// still counted after the first metric read); then nothing
	g.Expect(metricValue(t, e, "sluice_enforcer_redis_calls_total", `policy="auth"`)).To(BeNumerically("<=", calls+1),
		"a cached ban is refused without Redis")
	g.Expect(metricValue(t, e, "sluice_enforcer_ban_cached_refusals_total", `policy="auth"`)).To(BeNumerically(">=", 29))

	e.stop(t)
	restarted := start(t, setup{policies: policies})
	p := bannedBody(g, do(t, http.MethodPost, restarted.url+"/login", tenant))
	g.Expect(p.RetryAfter).To(BeNumerically(">", 3500), "the ban lives in Redis")
}

func TestBanListedAndLiftedOnOneEnforcerIsLiftedOnTheOther(t *testing.T) {
	g := NewWithT(t)
	policies := loginPolicy("auth", "1h", "24h")
	debug := freeAddr(t)
	// A standalone enforcer lifts a ban (DELETE /bans) for the peer it trusts.
	a := start(t, setup{policies: policies, args: []string{"--debug-listen", debug, "--admin-trusted-peer", "127.0.0.1"}})
	b := start(t, setup{policies: policies})
	tenant := tenantOf(t, "mallory")
	banTenant(t, g, a, tenant)
	bannedBody(g, do(t, http.MethodPost, b.url+"/login", tenant)) // b learns it from Redis, and caches it

	var list struct {
		Bans []struct {
			Rule, TenantHash string
			Until            time.Time
			Level            int64
		}
	}
	g.Eventually(func(g Gomega) {
		r := get(t, a.admin+"/bans?policy=auth")
		g.Expect(r.status).To(Equal(200), r.body)
		g.Expect(json.Unmarshal([]byte(r.body), &list)).To(Succeed())
		g.Expect(list.Bans).To(HaveLen(1))
	}).Should(Succeed())
	g.Expect(list.Bans[0].Rule).To(Equal("login"))
	g.Expect(list.Bans[0].Level).To(Equal(int64(1)))
	g.Expect(list.Bans[0].Until).To(BeTemporally("~", time.Now().Add(time.Hour), time.Minute))

	var st struct {
		Policies []struct {
			Name string
			Bans *struct{ Active int64 }
		}
	}
	g.Expect(json.Unmarshal([]byte(get(t, b.admin+"/status").body), &st)).To(Succeed())
	g.Expect(st.Policies).To(HaveLen(1))
	g.Expect(st.Policies[0].Bans).NotTo(BeNil())
	g.Expect(st.Policies[0].Bans.Active).To(Equal(int64(1)), "counted in Redis: the other enforcer's status has it too")

	name := strings.TrimPrefix(tenant, "X-Tenant-ID: ")
	var usage struct {
		Ban struct {
			Banned           bool
			Level            int64
			RemainingSeconds float64
		}
	}
	r := get(t, "http://"+debug+"/debug/tenant?policy=auth&rule=login&tenant="+url.QueryEscape(name))
	g.Expect(r.status).To(Equal(200), r.body)
	g.Expect(json.Unmarshal([]byte(r.body), &usage)).To(Succeed())
	g.Expect(usage.Ban.Banned).To(BeTrue(), r.body)
	g.Expect(usage.Ban.Level).To(Equal(int64(1)))
	g.Expect(usage.Ban.RemainingSeconds).To(BeNumerically("~", 3600, 60))

	r = do(t, http.MethodDelete, a.admin+"/bans?policy=auth&rule=login&tenant="+url.QueryEscape(name))
	g.Expect(r.status).To(Equal(200), r.body)
	g.Expect(r.body).To(ContainSubstring(`"lifted": true`))
	time.Sleep(1100 * time.Millisecond) // the limit's own window, which refused
	g.Expect(do(t, http.MethodPost, a.url+"/login", tenant).status).To(Equal(200), "lifted at once where it was lifted")
	lifted := time.Now()
	// b refuses from its cache until it checks again (every 5s); one
	// request per second stays under the limit of 2 per second
	g.Eventually(func() int { return do(t, http.MethodPost, b.url+"/login", tenant).status }, 10*time.Second, time.Second).Should(Equal(200))
	t.Logf("lifted on the other enforcer after %s", time.Since(lifted).Round(100*time.Millisecond))
	g.Expect(get(t, a.admin+"/status").body).To(MatchRegexp(`"active": 0`))
}

func TestBanOnRedisCluster(t *testing.T) {
	g := NewWithT(t)
	c, err := redistest.NewCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	policies := loginPolicy("auth", "1h", "24h")
	a := start(t, setup{policies: policies, redisURL: c.URL()})
	b := start(t, setup{policies: policies, redisURL: c.URL(), args: []string{"--admin-trusted-peer", "127.0.0.1"}})
	tenant := tenantOf(t, "mallory")
	banTenant(t, g, a, tenant)
	bannedBody(g, do(t, http.MethodPost, b.url+"/login", tenant))
	g.Eventually(func() string { return get(t, a.admin+"/status").body }).Should(MatchRegexp(`"active": 1`))
	name := strings.TrimPrefix(tenant, "X-Tenant-ID: ")
	r := do(t, http.MethodDelete, b.admin+"/bans?policy=auth&rule=login&tenant="+url.QueryEscape(name))
	g.Expect(r.status).To(Equal(200), r.body)
	time.Sleep(1100 * time.Millisecond) // the limit's own window, which refused
	g.Expect(do(t, http.MethodPost, b.url+"/login", tenant).status).To(Equal(200))
}

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	addrs, err := freeport.LoopbackAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}
