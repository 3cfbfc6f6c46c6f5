package runtime

import "github.com/sluice-dev/sluice/enforcer/route"

// TenantRecorder is told which tenant each rule decided for, to keep the
// heaviest and most refused tenants in bounded memory; a Recorder that
// implements it gets the calls. tenant is client input: an implementation
// keeps it only in a bounded structure and never as a metrics label.
type TenantRecorder interface {
	Tenant(p *route.Policy, r *route.Rule, tenant string, v Verdict)
}
