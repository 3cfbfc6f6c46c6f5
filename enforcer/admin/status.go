package admin

import (
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/status"
)

func redisStatus(be *engine.Backend, policies []string) status.Redis {
	h := be.Guard.Health()
	rs := status.Redis{Name: be.Name, URL: be.URL, Reachable: h.Reachable,
		ConsecutiveFailures: h.ConsecutiveFailures, LastError: h.LastError, Policies: policies}
	if !h.LastErrorAt.IsZero() {
		at := h.LastErrorAt
		rs.LastErrorAt = &at
	}
	return rs
}

// readiness says whether the enforcer can serve, and why not, in words that
// name no policy and no Redis (anyone who reaches the pod can read /readyz;
// /status has the details): it has a configuration, and every Redis backend is reachable unless none of its
// policies fails closed. While Redis is down, policies failing Open or to
// LocalFallback still serve, so the pod stays ready; a fail-closed policy
// would refuse every request it applies to, so the pod is taken out of
// its Service's endpoints instead.
func readiness(snap *engine.Snapshot) (bool, string) {
	if snap == nil {
		return false, "no configuration loaded"
	}
	for _, be := range snap.Backends() {
		if be.Guard.Health().Reachable {
			continue
		}
		for _, p := range snap.Policies() {
			if snap.BackendOf(p) == be && p.Failure.Mode == config.FailClosed {
				return false, "a Redis that a fail-closed policy needs is unreachable (/status names them)"
			}
		}
	}
	return true, "ok"
}
