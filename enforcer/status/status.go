/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package status is the enforcer's /status document: what an enforcer
// serves and what the operator's status controller decodes. It is the one
// declaration both sides import, so it imports nothing of the data plane
// and the manager links no Redis client through it. Fields are only ever
// added; readers ignore what they do not know.
package status

import "time"

// Path is where the enforcer's admin listener serves the document.
const Path = "/status"

// Document is the JSON document /status serves: what the operator reads to
// write each policy's status.
type Document struct {
	Pod       Pod       `json:"pod"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"startedAt"`
	// Ready is what /readyz answers.
	Ready bool `json:"ready"`
	// Upstream is the application URL the enforcer forwards to, fixed
	// when it starts (--upstream): a policy's changed upstreamPort applies
	// to pods started after the change.
	Upstream string   `json:"upstream,omitempty"`
	Config   Config   `json:"config"`
	Policies []Policy `json:"policies"`
	Redis    []Redis  `json:"redis"`
	// Overload is what the enforcer holds against its bounds; nil from
	// enforcers that have none.
	Overload *Overload `json:"overload,omitempty"`
	// Decisions are per policy name, since the enforcer started: a policy
	// counts once per request it applies to (denied when one of its rules
	// refused it, wouldDeny for a DryRun policy, else allowed).
	Decisions map[string]DecisionCounts `json:"decisions"`
	// TopTenants are the heaviest and most refused tenants of each rule.
	TopTenants []TopTenants `json:"topTenants,omitempty"`
}

// Overload is what the enforcer holds of what it may hold. While
// Overloaded it refuses new requests with 503 (near its memory limit, or at
// MaxInFlight).
type Overload struct {
	Overloaded bool `json:"overloaded"`
	// Since is when memory pressure began, nil while there is none.
	Since                *time.Time `json:"since,omitempty"`
	InFlight             int64      `json:"inFlight"`
	MaxInFlight          int        `json:"maxInFlight"`
	MaxInFlightPerTenant int        `json:"maxInFlightPerTenant"`
	Connections          int        `json:"connections"`
	MaxConnections       int        `json:"maxConnections"`
	// MemoryLimit is the soft memory limit (GOMEMLIMIT) in bytes, 0 when
	// none is set.
	MemoryLimit int64 `json:"memoryLimit,omitempty"`
	// Shed counts, by reason, the requests refused and the idle
	// connections closed for want of room since the enforcer started.
	Shed map[string]int64 `json:"shed"`
}

// Pod names the pod the enforcer runs in (empty outside Kubernetes).
type Pod struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// The states of the configuration in service, Config.State.
const (
	// StateWaiting: no configuration is loaded yet (the namespace's
	// ConfigMap is not written yet); the enforcer is not ready.
	StateWaiting = "Waiting"
	// StateEnforcing: the configuration in service has policies that
	// select this pod.
	StateEnforcing = "Enforcing"
	// StatePassThrough: no policy of the configuration in service selects
	// this pod (the last one was deleted, or changed its selector): traffic
	// passes through unlimited.
	StatePassThrough = "PassThrough"
)

// Config describes the configuration in service.
type Config struct {
	// State is StateWaiting, StateEnforcing or StatePassThrough.
	State string `json:"state"`
	// FileMissing says the configuration file was removed after it was
	// loaded (its ConfigMap deleted by hand): the last good configuration
	// stays in service, and changes to the policies do not reach this
	// enforcer until the file is back.
	FileMissing bool `json:"fileMissing,omitempty"`
	// Hash is config.Config.Hash of the whole configuration read (every
	// policy of the namespace, before selection by this pod's labels).
	Hash      string `json:"hash"`
	Namespace string `json:"namespace"`
	// Revision is the revision of the configuration in service
	// (0: unordered, a file written by hand).
	Revision int64 `json:"revision,omitempty"`
	// Pushes counts the configurations the manager pushed that were put
	// into service.
	Pushes   int64     `json:"pushes,omitempty"`
	LoadedAt time.Time `json:"loadedAt"`
	// Reloads counts configurations put into service after the first.
	Reloads      int64 `json:"reloads"`
	ReloadErrors int64 `json:"reloadErrors"`
	// LastReloadError is why the latest change was refused; empty when the
	// files on disk are the configuration in service.
	LastReloadError   string     `json:"lastReloadError,omitempty"`
	LastReloadErrorAt *time.Time `json:"lastReloadErrorAt,omitempty"`
}

// Policy is one policy this enforcer applies.
type Policy struct {
	Name        string `json:"name"`
	UID         string `json:"uid"`
	Generation  int64  `json:"generation"`
	Mode        string `json:"mode"`
	FailureMode string `json:"failureMode"`
	// Redis names the backend the policy decides with, an entry of
	// Document.Redis.
	Redis string `json:"redis"`
	// Adaptive are the policy's adaptive rules, with their effective limits.
	Adaptive []AdaptiveRule `json:"adaptive,omitempty"`
	// Bans, for a policy with a rule that bans, counts its tenants banned
	// now; nil when it has none or Redis could not count them.
	Bans *Bans `json:"bans,omitempty"`
}

// Bans are a policy's bans in force, counted in Redis (shared by every
// enforcer of the policy, so any one's count is the policy's).
type Bans struct {
	Active int64 `json:"active"`
}

// Redis is the health of one Redis backend, as the latest decisions and
// pings saw it.
type Redis struct {
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

// DecisionCounts are a policy's decisions since the enforcer started.
type DecisionCounts struct {
	Allowed   int64 `json:"allowed"`
	Denied    int64 `json:"denied"`
	WouldDeny int64 `json:"wouldDeny"`
	// Banned counts requests refused because their tenant was banned
	// from a rule; they are not in Denied.
	Banned int64 `json:"banned,omitempty"`
	// FailureMode counts rule decisions its failure mode made.
	FailureMode int64 `json:"failureMode"`
}
