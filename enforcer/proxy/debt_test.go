package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestDebtHeaderShowsWhatTheAnswersOwe: an answer reports 15 of a rule of
// 10 per hour, so the tenant owes 5. Its next request is refused with
// X-RateLimit-Remaining 0 and X-RateLimit-Debt 5, and for the algorithms
// that pay back by the unit a Retry-After of the debt and the cost's
// emission intervals; another tenant sees no debt.
func TestDebtHeaderShowsWhatTheAnswersOwe(t *testing.T) {
	for _, algorithm := range []string{"FixedWindow", "TokenBucket", "GCRA", "SlidingWindowCounter"} {
		t.Run(algorithm, func(t *testing.T) {
			g := NewWithT(t)
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Sluice-Cost", r.URL.Query().Get("cost"))
				_, _ = io.WriteString(w, "answer")
			})
			u, rec := serveAnswers(t, answerRule(algorithm, 1, `"responseCost": {"header": "X-Sluice-Cost"}`), app)
			tenant := fmt.Sprintf("X-Tenant: debt-%d", time.Now().UnixNano())

			r := get(g, u+"/v1/chat?cost=15", tenant)
			g.Expect(r.status).To(Equal(http.StatusOK))
			g.Expect(r.header).NotTo(HaveKey("X-Ratelimit-Debt"), "the first request owed nothing when it was decided")
			g.Eventually(func() int64 { rec.amu.Lock(); defer rec.amu.Unlock(); return rec.charged }).WithTimeout(10 * time.Second).Should(BeNumerically("==", 15))

			r = get(g, u+"/v1/chat?cost=1", tenant)
			g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
			g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
			g.Expect(r.header.Get("X-RateLimit-Debt")).To(Equal("5"), "15 charged of 10")
			g.Expect(r.header.Get("RateLimit")).To(ContainSubstring(";r=0;"), "the IETF field's remaining stays non-negative")
			retry, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
			g.Expect(err).NotTo(HaveOccurred())
			if algorithm == "TokenBucket" || algorithm == "GCRA" {
				// one unit comes back every 6 minutes: the debt of 5 and the
				// request's 1 in 36 minutes
				g.Expect(retry).To(BeNumerically("~", 6*360, 5))
			} else {
				g.Expect(retry).To(BeNumerically(">", 0))
			}

			other := get(g, u+"/v1/chat?cost=1", fmt.Sprintf("X-Tenant: other-%d", time.Now().UnixNano()))
			g.Expect(other.status).To(Equal(http.StatusOK))
			g.Expect(other.header).NotTo(HaveKey("X-Ratelimit-Debt"))
		})
	}
}
