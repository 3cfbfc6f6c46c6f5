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

package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/controllers"
	"github.com/sluice-dev/sluice/controllers/delivery"
	"github.com/sluice-dev/sluice/controllers/enforcerstatus"
	"github.com/sluice-dev/sluice/controllers/webhook"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// injectionOptions are the flags of the injection webhook, the sidecar it
// injects, its certificate and the status controller.
type injectionOptions struct {
	httpPort, adminPort   int
	runAsUser             int64
	maxProcs              int
	pullPolicy            string
	cpuRequest, cpuLimit  string
	memRequest, memLimit  string
	webhookPort           int
	webhookCertDir        string
	failurePolicy         string
	webhookTimeout        time.Duration
	certSelfManaged       bool
	certSecretValue       string
	webhookService        string
	webhookConfiguration  string
	statusInterval        time.Duration
	statusTimeout         time.Duration
	pushWorkers           int
	resources             corev1.ResourceRequirements
	certSecret            types.NamespacedName
	webhookFailurePolicy  admissionregistrationv1.FailurePolicyType
	webhookTimeoutSeconds int32
	enforcerArgs          enforcerArgs
}

// enforcerArgs are the --enforcer-arg values: the enforcer's own limits,
// which operators tune for their traffic (slow uploads, long polls).
type enforcerArgs []string

func (a *enforcerArgs) String() string     { return strings.Join(*a, " ") }
func (a *enforcerArgs) Set(v string) error { *a = append(*a, v); return nil }

// tunableEnforcerFlags are the enforcer flags --enforcer-arg may set; the
// others are the injector's to set, and a wrong one would break the pod.
var tunableEnforcerFlags = []string{
	"read-header-timeout", "body-timeout", "body-idle-timeout", "write-idle-timeout", "idle-timeout",
	"max-header-bytes", "max-request-body", "response-header-timeout", "http2-max-concurrent-streams", "redis-pool-size", "local-fallback-max-entries",
	"log-level", "shutdown-timeout", "drain-delay", "max-in-flight", "max-in-flight-per-tenant", "max-connections",
}

func (o *injectionOptions) bindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.httpPort, "enforcer-http-port", 15080, "port of the enforcer's proxy (named sluice-http) in injected pods")
	fs.IntVar(&o.adminPort, "enforcer-admin-port", 15081, "port of the enforcer's probes, metrics and /status (named sluice-admin) in injected pods")
	fs.Int64Var(&o.runAsUser, "enforcer-run-as-user", 65532, "non-root user and group the enforcer runs as")
	fs.StringVar(&o.pullPolicy, "enforcer-image-pull-policy", "", "Always, IfNotPresent or Never (default: the cluster's default for the image's tag)")
	fs.IntVar(&o.maxProcs, "enforcer-max-procs", inject.DefaultEnforcerMaxProcs,
		"GOMAXPROCS of the injected enforcer: how many threads run its Go code at once (0: Go's default, every CPU of the node, or the container's CPU limit rounded up, at least 2)")
	fs.StringVar(&o.cpuRequest, "enforcer-cpu-request", "50m", "CPU request of the enforcer container (empty: none)")
	fs.StringVar(&o.cpuLimit, "enforcer-cpu-limit", "", "CPU limit of the enforcer container (empty: none)")
	fs.StringVar(&o.memRequest, "enforcer-memory-request", "48Mi", "memory request of the enforcer container, above its idle resident memory (empty: none)")
	fs.StringVar(&o.memLimit, "enforcer-memory-limit", "128Mi", "memory limit of the enforcer container; it gets GOMEMLIMIT at 80% of it and bounds what it holds from that (empty: none)")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the injection webhook's HTTPS server")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding the webhook's tls.crt and tls.key")
	fs.StringVar(&o.failurePolicy, "webhook-failure-policy", string(admissionregistrationv1.Ignore),
		"Ignore or Fail: whether pods are created without the enforcer (Ignore) or refused (Fail) while the webhook cannot be reached")
	fs.DurationVar(&o.webhookTimeout, "webhook-timeout", 5*time.Second, "how long the API server waits for the webhook, 1s to 30s")
	fs.BoolVar(&o.certSelfManaged, "webhook-cert-self-managed", true,
		"generate and rotate the webhook's certificate and caBundle; false when cert-manager provides them")
	fs.StringVar(&o.certSecretValue, "webhook-cert-secret", "sluice-system/sluice-webhook-server-cert",
		"NAMESPACE/NAME of the Secret holding the webhook's CA and certificate (mounted at --webhook-cert-dir)")
	fs.StringVar(&o.webhookService, "webhook-service", "sluice-webhook-service", "name of the webhook's Service, in the Secret's namespace: the certificate's host name")
	fs.StringVar(&o.webhookConfiguration, "webhook-configuration", wellknown.InjectionWebhookConfigurationName,
		"name of the MutatingWebhookConfiguration whose caBundle, failurePolicy and timeout the manager keeps")
	fs.Var(&o.enforcerArgs, "enforcer-arg", "a flag of the injected enforcer, --NAME=VALUE (repeatable): one of --"+
		strings.Join(tunableEnforcerFlags, ", --"))
	fs.DurationVar(&o.statusInterval, "status-interval", enforcerstatus.DefaultInterval, "how often the enforcers' /status is polled")
	fs.DurationVar(&o.statusTimeout, "status-timeout", enforcerstatus.DefaultTimeout, "how long one enforcer's /status may take")
	fs.IntVar(&o.pushWorkers, "push-workers", delivery.DefaultWorkers, "how many configuration pushes to enforcers are in flight at once")
}

func (o *injectionOptions) validate(defaultRedisURL string) []error {
	var errs []error
	for _, p := range []struct {
		name string
		port int
	}{{"--enforcer-http-port", o.httpPort}, {"--enforcer-admin-port", o.adminPort}, {"--webhook-port", o.webhookPort}} {
		if p.port < 1 || p.port > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is not a port", p.name, p.port))
		}
	}
	if o.httpPort == o.adminPort {
		errs = append(errs, fmt.Errorf("--enforcer-http-port and --enforcer-admin-port are both %d", o.httpPort))
	}
	if o.maxProcs < 0 || o.maxProcs > inject.MaxEnforcerMaxProcs {
		errs = append(errs, fmt.Errorf("--enforcer-max-procs %d: use 0 (Go's default) to %d", o.maxProcs, inject.MaxEnforcerMaxProcs))
	}
	switch corev1.PullPolicy(o.pullPolicy) {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("--enforcer-image-pull-policy %q: use Always, IfNotPresent or Never", o.pullPolicy))
	}
	o.resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		flag, value string
		list        corev1.ResourceList
		name        corev1.ResourceName
	}{
		{"--enforcer-cpu-request", o.cpuRequest, o.resources.Requests, corev1.ResourceCPU},
		{"--enforcer-cpu-limit", o.cpuLimit, o.resources.Limits, corev1.ResourceCPU},
		{"--enforcer-memory-request", o.memRequest, o.resources.Requests, corev1.ResourceMemory},
		{"--enforcer-memory-limit", o.memLimit, o.resources.Limits, corev1.ResourceMemory},
	} {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", q.flag, q.value, err))
			continue
		}
		q.list[q.name] = v
	}
	switch fp := admissionregistrationv1.FailurePolicyType(o.failurePolicy); fp {
	case admissionregistrationv1.Ignore, admissionregistrationv1.Fail:
		o.webhookFailurePolicy = fp
	default:
		errs = append(errs, fmt.Errorf("--webhook-failure-policy %q: use Ignore or Fail", o.failurePolicy))
	}
	if o.webhookTimeout < time.Second || o.webhookTimeout > 30*time.Second || o.webhookTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--webhook-timeout %s: the API server takes whole seconds from 1s to 30s", o.webhookTimeout))
	}
	o.webhookTimeoutSeconds = int32(o.webhookTimeout / time.Second)
	ns, name, ok := strings.Cut(o.certSecretValue, "/")
	if !ok || ns == "" || name == "" {
		errs = append(errs, fmt.Errorf("--webhook-cert-secret %q: write NAMESPACE/NAME", o.certSecretValue))
	}
	o.certSecret = types.NamespacedName{Namespace: ns, Name: name}
	if o.statusInterval <= 0 || o.statusTimeout <= 0 {
		errs = append(errs, errors.New("--status-interval and --status-timeout must be positive"))
	}
	if o.pushWorkers <= 0 {
		errs = append(errs, errors.New("--push-workers must be positive"))
	}
	for _, arg := range o.enforcerArgs {
		name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !strings.HasPrefix(arg, "--") || !ok || value == "" || !slices.Contains(tunableEnforcerFlags, name) {
			errs = append(errs, fmt.Errorf("--enforcer-arg %q: write --NAME=VALUE with NAME one of %s", arg, strings.Join(tunableEnforcerFlags, ", ")))
		}
	}
	if err := inject.ValidateDefaultRedisURL(defaultRedisURL); err != nil {
		errs = append(errs, fmt.Errorf("--default-redis-url: %w", err))
	}
	return errs
}

// sidecar is the enforcer the webhook injects.
func (o *injectionOptions) sidecar(defaults controllers.Defaults) inject.EnforcerSidecar {
	return inject.EnforcerSidecar{
		Image:              defaults.EnforcerImage,
		ImagePullPolicy:    corev1.PullPolicy(o.pullPolicy),
		HTTPPort:           int32(o.httpPort),
		AdminPort:          int32(o.adminPort),
		Resources:          o.resources,
		RunAsUser:          o.runAsUser,
		MaxProcs:           o.maxProcs,
		DefaultRedisSecret: defaults.RedisSecret,
		DefaultRedisURL:    defaults.RedisURL,
		ExtraArgs:          slices.Clone(o.enforcerArgs),
	}
}

// certificates is where the webhook's certificate comes from.
func (o *injectionOptions) certificates() webhook.Certificates {
	return webhook.Certificates{
		SelfManaged:              o.certSelfManaged,
		CertDir:                  o.webhookCertDir,
		Secret:                   o.certSecret,
		ServiceName:              o.webhookService,
		WebhookConfigurationName: o.webhookConfiguration,
	}
}
