package rules

import (
	"testing"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// BenchmarkChecks measures the hot path before Redis for the example
// configuration (both policies applying), with a reused dst as the proxy
// would. Each check's tenant hash is one allocation (its hex string);
// an API key, a client IP and partitionBy add one each, a JWT claim about
// thirty (encoding/json).
func BenchmarkChecks(b *testing.B) {
	cases := map[string]*request.Request{
		"exempt health":        newRequest("GET", "/healthz"),
		"tenant header":        newRequest("GET", "/v1/orders/7", "X-Tenant-ID: acme"),
		"API key and tier":     newRequest("GET", "/v1/orders/7", "X-Tenant-ID: acme", "X-API-Key: sk_live_0123456789abcdef", "X-Plan: premium"),
		"client IP behind LB":  withRemote(newRequest("GET", "/v1/orders/7", "X-Forwarded-For: 198.51.100.4, 10.0.0.2"), "10.1.2.3:4000"),
		"JWT export partition": newRequest("POST", "/v1/exports/monthly", "X-Tenant-ID: acme", "X-API-Key: sk_live_0123456789abcdef", bearer(`{"iss":"https://auth.example.com/","sub":"user-42","aud":"shop","exp":1900000000,"iat":1800000000,"tenant_id":"acme","scope":"orders:read orders:write"}`)),
	}
	for name, req := range cases {
		b.Run(name, func(b *testing.B) {
			table := shop(b)
			dst := make([]Check, 0, 8)
			b.ReportAllocs()
			for b.Loop() {
				dst = table.Checks(req, dst[:0])
			}
		})
	}
}

func withRemote(r *request.Request, remote string) *request.Request {
	r.RemoteAddr = remote
	return r
}
