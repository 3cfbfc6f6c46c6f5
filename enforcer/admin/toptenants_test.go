package admin

import (
	"encoding/json"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/status"
)

func TestStatusListsTheHeaviestAndMostRefusedTenants(t *testing.T) {
	g := NewWithT(t)
	f := startWith(t, twoPolicies(t), redisURL, staticToken("t"))
	for range 8 {
		fetch(g, f.proxy+"/x", "X-Tenant: bob") // 5 admitted, 3 refused
	}
	for range 2 {
		fetch(g, f.proxy+"/x", "X-Tenant: carol")
	}
	w := send(f.server, http.MethodGet, "/status", "t")
	var doc status.Document
	g.Expect(json.Unmarshal(w.Body.Bytes(), &doc)).To(Succeed())
	var api *status.TopTenants
	for i := range doc.TopTenants {
		if doc.TopTenants[i].Policy == "api" && doc.TopTenants[i].Rule == "all" {
			api = &doc.TopTenants[i]
		}
	}
	g.Expect(api).NotTo(BeNil(), "top tenants of api/all in %s", w.Body.String())
	g.Expect(api.Heaviest).To(Equal([]status.TenantCount{{Tenant: "bob", Count: 8}, {Tenant: "carol", Count: 2}}))
	g.Expect(api.Refused).To(Equal([]status.TenantCount{{Tenant: "bob", Count: 3}}))
}
