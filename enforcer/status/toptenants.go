package status

// TopTenants are the heaviest and the most refused tenants of one rule
// that an enforcer saw over the last one to two minutes, from a bounded
// sketch: counts are estimates, each at most Error above the truth.
// Tenants are named as /debug/tenant names them: API keys as
// "sha256:<hex>", JWT claims hashed the same way, client IPs and header
// values as they are.
type TopTenants struct {
	Policy   string        `json:"policy"`
	Rule     string        `json:"rule"`
	Heaviest []TenantCount `json:"heaviest"`
	Refused  []TenantCount `json:"refused,omitempty"`
}

// TenantCount is one tenant and how many requests it made (or had
// refused).
type TenantCount struct {
	Tenant string `json:"tenant"`
	Count  int64  `json:"count"`
	Error  int64  `json:"error,omitempty"`
}
