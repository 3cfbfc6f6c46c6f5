package admin

import (
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/proxy"
)

// Status is the JSON document /status serves: what the operator reads to
// write each policy's status. Fields are only ever added.
type Status struct {
	Pod       Pod       `json:"pod"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"startedAt"`
	// Ready is what /readyz answers.
	Ready    bool           `json:"ready"`
	Config   ConfigStatus   `json:"config"`
	Policies []PolicyStatus `json:"policies"`
	Redis    []RedisStatus  `json:"redis"`
	// Decisions are per policy name, since the enforcer started: a policy
	// counts once per request it applies to (denied when one of its rules
	// refused it, wouldDeny for a DryRun policy, else allowed).
	Decisions map[string]DecisionCounts `json:"decisions"`
}

// Pod names the pod the enforcer runs in (empty outside Kubernetes).
type Pod struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// ConfigStatus describes the configuration in service.
type ConfigStatus struct {
	// Hash is config.Config.Hash of the whole configuration read (every
	// policy of the namespace, before selection by this pod's labels).
	Hash      string    `json:"hash"`
	Namespace string    `json:"namespace"`
	LoadedAt  time.Time `json:"loadedAt"`
	// Reloads counts configurations put into service after the first.
	Reloads      int64 `json:"reloads"`
	ReloadErrors int64 `json:"reloadErrors"`
	// LastReloadError is why the latest change was refused; empty when the
	// files on disk are the configuration in service.
	LastReloadError   string     `json:"lastReloadError,omitempty"`
	LastReloadErrorAt *time.Time `json:"lastReloadErrorAt,omitempty"`
}

// PolicyStatus is one policy this enforcer applies.
type PolicyStatus struct {
	Name        string `json:"name"`
	UID         string `json:"uid"`
	Generation  int64  `json:"generation"`
	Mode        string `json:"mode"`
	FailureMode string `json:"failureMode"`
	// Redis is the backend the policy decides with.
	Redis string `json:"redis"`
}

// RedisStatus is the health of one Redis backend, as the latest decisions
// and pings saw it.
type RedisStatus struct {
	// Name is "default" or the environment variable holding the URL.
	Name string `json:"name"`
	// URL has its password redacted.
	URL                 string     `json:"url"`
	Reachable           bool       `json:"reachable"`
	ConsecutiveFailures int64      `json:"consecutiveFailures"`
	LastError           string     `json:"lastError,omitempty"`
	LastErrorAt         *time.Time `json:"lastErrorAt,omitempty"`
	Policies            []string   `json:"policies"`
}

func redisStatus(be *proxy.Backend, policies []string) RedisStatus {
	h := be.Guard.Health()
	rs := RedisStatus{Name: be.Name, URL: be.URL, Reachable: h.Reachable,
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
func readiness(snap *proxy.Snapshot) (bool, string) {
	if snap == nil {
		return false, "no configuration loaded"
	}
	for _, be := range snap.Backends() {
		if be.Guard.Health().Reachable {
			continue
		}
		for _, p := range snap.Table.Policies() {
			if snap.BackendOf(p) == be && p.Failure.Mode == config.FailClosed {
				return false, "a Redis that a fail-closed policy needs is unreachable (/status names them)"
			}
		}
	}
	return true, "ok"
}
