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

package v1alpha1

// Condition types of a RateLimitPolicy. Ready is always present; Reconciling
// and Stalled are present only while true (kstatus).
const (
	// ConditionAccepted is True when the spec compiled into enforcer
	// configuration, False when the spec cannot be enforced as written.
	ConditionAccepted = "Accepted"
	// ConditionReady is True when every selected pod runs an enforcer that has
	// loaded the current generation and reaches storage.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator or the enforcers are
	// moving towards the current generation.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a change by the user.
	ConditionStalled = "Stalled"
)

// Reasons of the Accepted condition.
const (
	// ReasonCompiled: the spec compiled and its configuration is published.
	ReasonCompiled = "Compiled"
	// ReasonInvalidSpec: the spec breaks a rule the schema cannot express.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonStorageSecretMissing: spec.storage names a Secret or key that
	// does not exist.
	ReasonStorageSecretMissing = "StorageSecretMissing"
	// ReasonCompiledUnverifiedTokens: the spec compiled, but a jwtClaim
	// source reads tokens unverified (verify: false), so any client can
	// name its own tenant or tier. Accepted is True, its message the
	// warning.
	ReasonCompiledUnverifiedTokens = "CompiledUnverifiedTokens"
	// ReasonKeySetMissing: a jwtClaim source's keys name a Secret,
	// ConfigMap or key that does not exist, or one holding no usable JSON
	// Web Key Set.
	ReasonKeySetMissing = "KeySetMissing"
	// ReasonConfigTooLarge: the namespace's compiled configuration does not
	// fit in one ConfigMap.
	ReasonConfigTooLarge = "ConfigTooLarge"
	// ReasonConflictingUpstreamPorts: an older policy with another
	// upstreamPort can select the same pods, whose one enforcer forwards to
	// one port.
	ReasonConflictingUpstreamPorts = "ConflictingUpstreamPorts"
	// ReasonConflictingUpstreamProtocols: an older policy with the same
	// upstreamPort but another upstreamProtocol can select the same pods,
	// whose one enforcer speaks one protocol to the application.
	ReasonConflictingUpstreamProtocols = "ConflictingUpstreamProtocols"
	// ReasonConflictingDomains: an older policy of the namespace names the
	// same rateLimitService.domain, and one policy answers a domain's calls.
	ReasonConflictingDomains = "ConflictingDomains"
)

// Reasons of the Ready condition.
const (
	// ReasonEnforcersReady: every selected pod's enforcer runs the current
	// generation and reaches storage.
	ReasonEnforcersReady = "EnforcersReady"
	// ReasonEnforcersNotReady: some selected pods have no enforcer, or one
	// that is not ready.
	ReasonEnforcersNotReady = "EnforcersNotReady"
	// ReasonEnforcersNotReported: pods are selected but no enforcer status
	// has been collected for them yet. The status controller, Ready's one
	// writer, waits for its poller's first answers instead of setting it;
	// it stays part of the API for clients that match on it.
	ReasonEnforcersNotReported = "EnforcersNotReported"
	// ReasonEnforcersStale: some enforcers still run an older generation.
	ReasonEnforcersStale = "EnforcersStale"
	// ReasonRestartRequired: some enforcers forward to another port than
	// spec.upstreamPort, which an enforcer takes when its pod starts: the
	// pods must be restarted for the change to apply.
	ReasonRestartRequired = "RestartRequired"
	// ReasonDegraded: some enforcers cannot reach storage and apply the
	// policy's failureMode.
	ReasonDegraded = "Degraded"
	// ReasonOverloaded: some enforcers hold as much as their memory allows
	// and refuse new requests with 503 until some end.
	ReasonOverloaded = "Overloaded"
	// ReasonNoPodsSelected: the selector matches no running pod.
	ReasonNoPodsSelected = "NoPodsSelected"
	// ReasonNotAccepted: the spec was not accepted, so nothing is enforced.
	ReasonNotAccepted = "NotAccepted"
)

// Reasons of the Reconciling condition.
const (
	// ReasonProgressing: a new generation is being compiled or rolled out to
	// the enforcers.
	ReasonProgressing = "Progressing"
)

// Condition type and reasons of adaptive limits (rules with adaptive).
const (
	// ConditionThrottled is True while the application's health holds an
	// adaptive rule's limits below 100%, False once they are back in full.
	// Present only on policies with adaptive rules.
	ConditionThrottled = "Throttled"
	// ReasonThrottledByHealth: the application's latency or error rate is
	// over an adaptive rule's target, so its limits are scaled down.
	ReasonThrottledByHealth = "ThrottledByHealth"
	// ReasonHealthy: every adaptive rule applies its limits in full.
	ReasonHealthy = "Healthy"
)

// Reasons of the policy controller's Events that are no condition's.
const (
	// ReasonConfigMapRecreated is the Warning Event on a namespace's
	// policies when the manager wrote its ConfigMap again after someone
	// deleted it: until the kubelet brought the new file, enforcers kept
	// their last good configuration and took no change.
	ReasonConfigMapRecreated = "ConfigMapRecreated"
)
