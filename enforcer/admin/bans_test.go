package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
)

func TestBansNeedTheCredential(t *testing.T) {
	g := NewWithT(t)
	f := startWithAccess(t, twoPolicies(t), redisURL, readWrite)
	pod := "10.244.1.7:41234"
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		path := "/bans?policy=api&rule=all&tenant=acme"
		for _, c := range []struct {
			authorization string
			code          int
		}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusUnauthorized},
			// policy api has no rule with a ban
			{"Bearer t", http.StatusNotFound}} {
			req := httptest.NewRequest(method, path, nil)
			req.RemoteAddr = pod
			if c.authorization != "" {
				req.Header.Set("Authorization", c.authorization)
			}
			w := httptest.NewRecorder()
			f.server.ServeHTTP(w, req)
			g.Expect(w.Code).To(Equal(c.code), "%s %q: %s", method, c.authorization, w.Body.String())
		}
	}
	g.Expect(request(f.server, pod, "/bans?policy=api", "Bearer t").Body.String()).To(ContainSubstring("has no rule with a ban"))
}
