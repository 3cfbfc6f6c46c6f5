// Package wellknown holds the names that the manager, the injected pods,
// the enforcer's operators and the tests agree on: labels, annotations,
// the ConfigMap and Secret of a namespace, the sidecar's container and
// port names. It imports nothing, so that everything may import it.
package wellknown

// Namespaces and pods.
const (
	// InjectionNamespaceLabel=InjectionEnabled turns injection on for a
	// namespace; the webhook is not even called for other namespaces.
	InjectionNamespaceLabel = "sluice.dev/injection"
	InjectionEnabled        = "enabled"
	// InjectAnnotation "false" on a pod opts it out of injection. The same
	// key as a label opts it out before the webhook is called.
	InjectAnnotation = "sluice.dev/inject"
	// InjectedAnnotation marks an injected pod with the enforcer image.
	InjectedAnnotation = "sluice.dev/injected"
	// EnforcerLabel=EnforcerLabelValue marks an injected pod, for the
	// NetworkPolicy that guards the enforcer's admin port.
	EnforcerLabel      = "sluice.dev/enforcer"
	EnforcerLabelValue = "injected"
)

// The injected sidecar.
const (
	// EnforcerContainerName is the injected native sidecar.
	EnforcerContainerName = "sluice-enforcer"
	// HTTPPortName is the enforcer's proxy port: Services target it.
	HTTPPortName = "sluice-http"
	// AdminPortName is the enforcer's probes, metrics and /status port.
	AdminPortName = "sluice-admin"
	// EnforcerDebugPort is the port of the enforcer's debug listener, on
	// the pod's loopback only: kubectl port-forward pod/NAME 9902.
	EnforcerDebugPort = 9902
	// DefaultRedisURLEnv is the enforcer's variable for the operator's
	// default Redis, used by policies without spec.storage.
	DefaultRedisURLEnv = "SLUICE_REDIS_URL"
)

// What the manager keeps in each namespace with policies.
const (
	// ConfigMapName is the ConfigMap that holds the namespace's compiled
	// configuration, for as long as it has policies or injected pods.
	ConfigMapName = "sluice-enforcer-config"
	// ServiceConfigMapName is the ConfigMap that holds the compiled
	// configuration of the namespace's rateLimitService policies, which the
	// rate limit service's pods mount (docs/ratelimit-admin.md), for as long
	// as it has such policies or pods mounting it. Not
	// sluice-ratelimit-config, the name config/ratelimit gives the
	// envoyproxy/ratelimit files of the service, which are the user's.
	ServiceConfigMapName = "sluice-ratelimit-policies"
	// ConfigKey is the key of ConfigMapName's and ServiceConfigMapName's
	// data holding the JSON.
	ConfigKey = "config.json"
	// RevisionKey is the key of ConfigMapName's data holding the revision
	// of its configuration (config.Config.Revision), a decimal number.
	RevisionKey = "revision"
	// CompressedConfigKey is the key of the ConfigMaps' binaryData holding
	// the same JSON gzip-compressed, instead of ConfigKey, once it is large
	// (ConfigKey and enforcer/config.CompressedSuffix).
	CompressedConfigKey = ConfigKey + ".gz"
	// ConfigHashAnnotation carries config.Config.Hash() of the published
	// configuration, which enforcers report on /status once they load it.
	ConfigHashAnnotation = "sluice.dev/config-hash"
	// ManagedByLabel and ManagedByValue mark the ConfigMaps the manager
	// writes; it caches no other ConfigMap.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "sluice"
	// AdminSecretName is the Secret that holds the read token enforcers
	// require on /status, GET /bans and /debug/tenant. The manager reads it;
	// the webhook mounts it into the enforcer, so no token is in a pod spec.
	AdminSecretName = "sluice-enforcer-admin"
	// AdminWriteSecretName holds the write token, which DELETE /tenant and
	// DELETE /bans require (kubectl sluice reset and unban): a Secret of its
	// own, so that RBAC grants get on one and not the other.
	AdminWriteSecretName = "sluice-enforcer-admin-write"
	// AdminTokenKey is the key of either Secret's data holding the token.
	AdminTokenKey = "token"
)

// AdminSecretNames are the admin Secrets the manager keeps in each
// namespace with policies.
var AdminSecretNames = []string{AdminSecretName, AdminWriteSecretName}

// The rate limit service's pods (the chart's rateLimitService Deployment),
// which the status controller polls for the policies with
// spec.rateLimitService of their namespace as it polls enforcers for the
// others.
const (
	// RateLimitServiceLabel, set to RateLimitServiceLabelValue, marks a pod
	// of the rate limit service.
	RateLimitServiceLabel      = "sluice.dev/ratelimit-service"
	RateLimitServiceLabelValue = "true"
	// RateLimitServiceContainerName is the service's container in its pods.
	RateLimitServiceContainerName = "ratelimit"
	// RateLimitServiceAdminPortName names the port of that container where
	// the service serves the enforcer's /status document.
	RateLimitServiceAdminPortName = "admin"
)

// The injection webhook.
const (
	// InjectionWebhookConfigurationName and InjectionWebhookName name the
	// MutatingWebhookConfiguration and its one webhook.
	InjectionWebhookConfigurationName = "sluice-injector"
	InjectionWebhookName              = "inject.sluice.dev"
)
