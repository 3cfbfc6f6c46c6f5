package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
)

// send serves method path to h as from a pod's address, with the bearer
// token when not empty.
func send(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
	return sendFrom(h, "10.244.1.7:41234", method, path, token)
}

// sendFrom serves method path to h as from remote.
func sendFrom(h http.Handler, remote, method, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = remote
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// readWrite sets a read token "r" and a write token "t".
func readWrite(o *Options) { o.StatusToken, o.WriteToken = staticToken("r"), staticToken("t") }

func TestTenantEndpointsOnTheAdminPortNeedTheToken(t *testing.T) {
	g := NewWithT(t)
	f := startWithAccess(t, twoPolicies(t), redisURL, readWrite)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/debug/tenant?policy=api&rule=all&tenant=acme"},
		{http.MethodDelete, "/tenant?policy=api&rule=all&tenant=acme"},
	} {
		g.Expect(send(f.server, c.method, c.path, "").Code).To(Equal(http.StatusUnauthorized), "%s %s without a token", c.method, c.path)
		g.Expect(send(f.server, c.method, c.path, "wrong").Code).To(Equal(http.StatusUnauthorized), "%s %s with a wrong token", c.method, c.path)
		w := send(f.server, c.method, c.path, "t")
		g.Expect(w.Code).To(Equal(http.StatusOK), "%s %s: %s", c.method, c.path, w.Body.String())
	}
}

func TestResetTenantStartsItsBucketAfresh(t *testing.T) {
	g := NewWithT(t)
	f := startWithAccess(t, twoPolicies(t), redisURL, readWrite)
	for range 5 {
		fetch(g, f.proxy+"/x", "X-Tenant: bob")
	}
	fetch(g, f.proxy+"/x", "X-Tenant: carol")
	code, _ := fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusTooManyRequests), "bob used his 5 an hour")

	w := send(f.server, http.MethodDelete, "/tenant?policy=api&rule=all&tenant=bob", "t")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	var reset debugapi.TenantReset
	g.Expect(json.Unmarshal(w.Body.Bytes(), &reset)).To(Succeed())
	g.Expect(reset.Deleted).To(BeEquivalentTo(1))
	g.Expect(reset.Tenant).To(HaveLen(24))

	code, _ = fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusOK), "the refusal cached by this enforcer is forgotten too")
	w = send(f.server, http.MethodGet, "/debug/tenant?policy=api&rule=all&tenant=carol", "t")
	g.Expect(w.Body.String()).To(ContainSubstring(`"remaining": 4`), "another tenant keeps its count")

	w = send(f.server, http.MethodDelete, "/tenant?policy=api&rule=all&tenant=nobody", "t")
	g.Expect(w.Body.String()).To(ContainSubstring(`"deleted": 0`))
	g.Expect(send(f.server, http.MethodDelete, "/tenant?policy=api&rule=nope&tenant=bob", "t").Code).To(Equal(http.StatusNotFound))
	g.Expect(send(f.server, http.MethodDelete, "/tenant?policy=nope&rule=all&tenant=bob", "t").Code).To(Equal(http.StatusNotFound))
	g.Expect(send(f.server, http.MethodDelete, "/tenant?policy=api&rule=all", "t").Code).To(Equal(http.StatusBadRequest))
}
