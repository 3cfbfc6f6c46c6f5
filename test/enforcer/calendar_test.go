package enforcer

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Two built enforcers share a monthly quota in Europe/Berlin (with a daily
// quota in New York on the same rule): together they admit the quota and
// no more, and every header, the problem body and /debug/tenant give the
// true time to the month's end in Berlin.
func TestCalendarMonthlyQuotaAcrossTwoEnforcers(t *testing.T) {
	g := NewWithT(t)
	spec := policy("plans", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: plan
      algorithm: FixedWindow
      limits:
        - {requests: 6, calendar: {unit: Month, timeZone: Europe/Berlin}}
        - {requests: 100, calendar: {unit: Day, timeZone: America/New_York}}`)
	debug := freeAddr(t)
	e1 := start(t, setup{policies: spec, args: []string{"--debug-listen", debug}})
	e2 := start(t, setup{policies: spec})
	tenant := tenantOf(t, "acme")

	berlin, err := time.LoadLocation("Europe/Berlin")
	g.Expect(err).NotTo(HaveOccurred())
	now := time.Now().In(berlin)
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, berlin)
	monthEnd := monthStart.AddDate(0, 1, 0)

	r := get(t, e1.url+"/v1/orders", tenant)
	g.Expect(r.status).To(Equal(200))
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("5"))
	g.Expect(r.header.Get("X-RateLimit-Reset")).To(Equal(strconv.FormatInt(monthEnd.Unix(), 10)), "the Unix second the month ends in Berlin")
	g.Expect(r.header.Get("RateLimit-Policy")).To(Equal(fmt.Sprintf(`"plans/plan";q=6;w=%d`, int64(monthEnd.Sub(monthStart)/time.Second))),
		"w= is this month's length in Berlin")

	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range 20 {
		e := e1
		if i%2 == 1 {
			e = e2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := get(t, e.url+"/v1/orders", tenant)
			mu.Lock()
			statuses[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	g.Expect(statuses).To(Equal(map[int]int{200: 5, 429: 15}), "the two enforcers admit the 5 left of the month's 6, no more")

	r = get(t, e2.url+"/v1/orders", tenant)
	g.Expect(r.status).To(Equal(429))
	p := refusal(g, r)
	untilEnd := int64(time.Until(monthEnd) / time.Second)
	g.Expect(p.RetryAfter).To(BeNumerically("~", untilEnd, 30), "Retry-After is the time left to the month's end in Berlin")
	g.Expect(r.header.Get("RateLimit")).To(MatchRegexp(`^"plans/plan";r=0;t=%d$`, p.RetryAfter))
	g.Expect(p.Detail).To(Equal(fmt.Sprintf("Rule plan of policy plans allows 6 requests per month (Europe/Berlin). Retry in %d s.", p.RetryAfter)))

	d := get(t, "http://"+debug+"/debug/tenant?tenant="+url.QueryEscape(tenant[len("X-Tenant-ID: "):])+"&path=/v1/orders")
	g.Expect(d.status).To(Equal(200), d.body)
	var report struct {
		Rules []struct {
			Windows []struct {
				Calendar *struct{ Unit, TimeZone string } `json:"calendar"`
				Current  *struct {
					TimeZone   string `json:"timeZone"`
					Start, End string
					Seconds    int64
				} `json:"current"`
			} `json:"windows"`
		} `json:"rules"`
	}
	g.Expect(json.Unmarshal([]byte(d.body), &report)).To(Succeed(), d.body)
	g.Expect(report.Rules).To(HaveLen(1), d.body)
	month := report.Rules[0].Windows[0]
	g.Expect(month.Calendar).NotTo(BeNil(), d.body)
	g.Expect(month.Current).NotTo(BeNil(), d.body)
	g.Expect(month.Current.TimeZone).To(Equal("Europe/Berlin"))
	g.Expect(month.Current.Start).To(Equal(monthStart.Format(time.RFC3339)), "the window's start in Berlin's offset")
	g.Expect(month.Current.End).To(Equal(monthEnd.Format(time.RFC3339)))
	g.Expect(month.Current.Seconds).To(Equal(int64(monthEnd.Sub(monthStart) / time.Second)))
}
