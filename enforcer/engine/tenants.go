package engine

import "github.com/sluice-dev/sluice/enforcer/rules"

// TenantRecorder is told which tenant each rule decided for, to keep the
// heaviest and most refused tenants in bounded memory; a Recorder that
// implements it gets the calls. tenant is client input: an implementation
// keeps it only in a bounded structure and never as a metrics label.
type TenantRecorder interface {
	Tenant(p *rules.Policy, r *rules.Rule, tenant string, v Verdict)
}
