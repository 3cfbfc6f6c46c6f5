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
	"io"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers"
	"github.com/sluice-dev/sluice/controllers/policy"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// options are the manager's command line.
type options struct {
	metricsAddr          string
	probeAddr            string
	pprofAddr            string
	leaderElect          bool
	leaderElectionNS     string
	leaderElectionID     string
	watchNamespaces      []string
	concurrency          int
	kubeAPIQPS           float64
	kubeAPIBurst         int
	defaults             controllers.Defaults
	showVersion          bool
	zap                  zap.Options
	watchNamespacesValue string
	failureModeValue     string
	redisSecretValue     string
	injection            injectionOptions
	networkPolicyFlags   networkPolicyOptions
	// networkPolicy is nil unless --enforcer-network-policy.
	networkPolicy *policy.EnforcerNetworkPolicy
}

func parseOptions(args []string, output io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("sluice-manager", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "sluice-manager runs the Sluice controllers: it compiles the RateLimitPolicies of each\n"+
			"namespace into ConfigMap %s and reports their status.\n\nUsage: sluice-manager [flags]\n\nFlags:\n", wellknown.ConfigMapName)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; \"0\" turns it off")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address of Go's profiles (/debug/pprof/); empty or \"0\" turns them off (the default): a profile shows internals and costs CPU while it runs")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader through a Lease, so that only one of several replicas reconciles")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the namespace the manager runs in)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "sluice-manager.sluice.dev", "name of the leader election Lease")
	fs.StringVar(&o.watchNamespacesValue, "watch-namespaces", "", "comma-separated namespaces whose policies to reconcile (default: all)")
	fs.IntVar(&o.concurrency, "concurrency", 2, "namespaces reconciled at once")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 50, "requests per second the manager sends the API server, sustained")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "requests the manager may send the API server in a burst")
	fs.StringVar(&o.defaults.RedisURL, "default-redis-url", "",
		"Redis URL (redis://, rediss://, Sentinel or Cluster) of policies without spec.storage; it is written into "+
			"the pods' specs, so it must not carry a password: use --default-redis-secret for one that does")
	fs.StringVar(&o.redisSecretValue, "default-redis-secret", "",
		"NAME[:KEY] of a Secret holding the Redis URL of policies without spec.storage (KEY defaults to url); "+
			"the enforcers read it from a Secret of that name in their own namespace, and it wins over --default-redis-url")
	fs.StringVar(&o.defaults.EnforcerImage, "enforcer-image", "", "image of the enforcer sidecar injected into selected pods")
	fs.StringVar(&o.failureModeValue, "default-failure-mode", string(v1alpha1.DefaultFailureMode),
		"Open, Closed or LocalFallback: the failure mode of policies stored without spec.failureMode "+
			"(the CRD defaults it to Open when a policy is created, so this applies to policies stored before that default)")
	o.injection.bindFlags(fs)
	o.networkPolicyFlags.bindFlags(fs)
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	o.zap.BindFlags(fs)
	config.RegisterFlags(fs) // --kubeconfig, read by ctrl.GetConfigOrDie

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: sluice-manager takes flags only", fs.Args())
	}
	return o, o.validate()
}

func (o *options) validate() error {
	var errs []error
	mode := v1alpha1.FailureMode(o.failureModeValue)
	if !slices.Contains([]v1alpha1.FailureMode{v1alpha1.FailureModeOpen, v1alpha1.FailureModeClosed, v1alpha1.FailureModeLocalFallback}, mode) {
		errs = append(errs, fmt.Errorf("--default-failure-mode %q: use Open, Closed or LocalFallback", o.failureModeValue))
	}
	o.defaults.FailureMode = mode
	for _, ns := range strings.Split(o.watchNamespacesValue, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
			continue
		}
		o.watchNamespaces = append(o.watchNamespaces, ns)
	}
	if o.redisSecretValue != "" {
		name, key, _ := strings.Cut(o.redisSecretValue, ":")
		if key == "" {
			key = v1alpha1.DefaultStorageSecretKey
		}
		if msgs := append(validation.IsDNS1123Subdomain(name), validation.IsConfigMapKey(key)...); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--default-redis-secret %q: %s; write NAME or NAME:KEY", o.redisSecretValue, strings.Join(msgs, "; ")))
		} else {
			o.defaults.RedisSecret = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
		}
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %g and %d", o.kubeAPIQPS, o.kubeAPIBurst))
	}
	if o.concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency must be at least 1, got %d", o.concurrency))
	}
	errs = append(errs, o.injection.validate(o.defaults.RedisURL)...)
	np, npErrs := o.networkPolicyFlags.policy(o.injection.adminPort)
	o.networkPolicy, errs = np, append(errs, npErrs...)
	return errors.Join(errs...)
}

// exitCode is the exit status for a command line error: 0 for -h, whose
// help is no failure.
func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(os.Stderr, err)
	return 2
}
