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

// Command sluice-manager runs the Sluice controllers: wiring only.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers"
	injectionwebhook "github.com/sluice-dev/sluice/controllers/webhook"
	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/listenhint"
)

// version is set at build time with -ldflags "-X main.version=v0.1.0".
var version = ""

func main() {
	opts, err := parseOptions(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(exitCode(err))
	}
	if opts.showVersion {
		fmt.Println("sluice-manager", buildVersion())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))
	if err := run(ctrl.SetupSignalHandler(), opts); err != nil {
		ctrl.Log.Error(err, "sluice-manager stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, opts *options) error {
	log := ctrl.Log.WithName("setup")
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}

	cacheOpts := cache.Options{
		ByObject:         controllers.CacheByObject(),
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if len(opts.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(opts.kubeAPIQPS), opts.kubeAPIBurst
	webhookServer, stopWebhook := injectionwebhook.StoppedFirst(
		webhook.NewServer(webhook.Options{Port: opts.injection.webhookPort, CertDir: opts.injection.webhookCertDir}))
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress:        opts.probeAddr,
		PprofBindAddress:              opts.pprofAddr,
		LeaderElection:                opts.leaderElect,
		LeaderElectionID:              opts.leaderElectionID,
		LeaderElectionNamespace:       opts.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", opts.explainListen(err))
	}
	if err := mgr.Add(stopWebhook); err != nil {
		return err
	}

	serving, err := controllers.Setup(ctx, mgr, controllers.Options{
		Namespaces:         opts.watchNamespaces,
		Concurrency:        opts.concurrency,
		DefaultFailureMode: opts.defaults.FailureMode,
		NetworkPolicy:      opts.networkPolicy,
		Sidecar:            opts.injection.sidecar(opts.defaults),
		StatusInterval:     opts.injection.statusInterval,
		StatusTimeout:      opts.injection.statusTimeout,
		PushWorkers:        opts.injection.pushWorkers,
		Webhook: controllers.WebhookOptions{
			ConfigurationName: opts.injection.webhookConfiguration,
			FailurePolicy:     opts.injection.webhookFailurePolicy,
			TimeoutSeconds:    opts.injection.webhookTimeoutSeconds,
			Certificates:      opts.injection.certificates(),
		},
	})
	if err != nil {
		return err
	}
	if serving != nil {
		if err := mgr.AddReadyzCheck("webhook", serving); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}

	log.Info("starting sluice-manager", "version", buildVersion(),
		"watchNamespaces", opts.watchNamespaces, "leaderElection", opts.leaderElect,
		"defaultFailureMode", opts.defaults.FailureMode, "defaultRedisURL", opts.defaults.RedisURL, "defaultRedisSecret", opts.defaults.RedisSecret,
		"enforcerImage", opts.defaults.EnforcerImage, "enforcerNetworkPolicy", opts.networkPolicy != nil)
	return opts.explainListen(mgr.Start(ctx))
}

// explainListen names, in a failure to bind one of the manager's
// listeners, the flag that moves it.
func (o *options) explainListen(err error) error {
	return listenhint.Explain(err,
		listenhint.Listener{Name: "metrics", Addr: o.metricsAddr, Flag: "metrics-bind-address"},
		listenhint.Listener{Name: "health probe", Addr: o.probeAddr, Flag: "health-probe-bind-address"},
		listenhint.Listener{Name: "pprof", Addr: o.pprofAddr, Flag: "pprof-bind-address"},
		listenhint.Listener{Name: "webhook", Addr: net.JoinHostPort("", strconv.Itoa(o.injection.webhookPort)), Flag: "webhook-port"})
}

func buildVersion() string { return buildinfo.Version(version) }
