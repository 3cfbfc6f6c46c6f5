package main

import (
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/metrics"
)

func TestPprofFlag(t *testing.T) {
	g := NewWithT(t)
	for _, on := range []bool{false, true} {
		var args []string
		if on {
			args = []string{"--pprof"}
		}
		o, _, err := parseFlags(append(args, "--upstream", "http://127.0.0.1:8080", "--config", "c.json"), env(nil), nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.pprof).To(Equal(on))

		srv := admin.New(admin.Options{Metrics: metrics.NewMetrics("test"), Pprof: o.pprof})
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/debug/pprof/", nil)
		req.RemoteAddr = "127.0.0.1:40000" // the debug listener is loopback's
		srv.Debug().ServeHTTP(w, req)
		if on {
			g.Expect(w.Code).To(Equal(200))
			g.Expect(w.Body.String()).To(ContainSubstring("goroutine"))
		} else {
			g.Expect(w.Code).To(Equal(404))
		}
	}
	o, _, err := parseFlags([]string{"--upstream", "http://127.0.0.1:8080", "--config", "c.json"}, env(map[string]string{"SLUICE_PPROF": "true"}), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.pprof).To(BeTrue())
}
