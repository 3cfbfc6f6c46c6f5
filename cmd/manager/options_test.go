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
	"bytes"
	"flag"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

func noEnv(string) string { return "" }

func TestParseOptions(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	o, err := parseOptions([]string{
		"--leader-elect", "--watch-namespaces", "shop, billing", "--default-failure-mode", "LocalFallback",
		"--enforcer-image", "sluice-enforcer:v1", "--default-redis-url", "redis://redis:6379",
	}, noEnv, &out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.leaderElect).To(BeTrue())
	g.Expect(o.watchNamespaces).To(Equal([]string{"shop", "billing"}))
	g.Expect(o.defaults.FailureMode).To(Equal(v1alpha1.FailureModeLocalFallback))
	g.Expect(o.defaults.EnforcerImage).To(Equal("sluice-enforcer:v1"))
	g.Expect(o.defaults.RedisURL).To(Equal("redis://redis:6379"))
}

func TestParseOptionsDefaults(t *testing.T) {
	g := NewWithT(t)
	o, err := parseOptions(nil, func(k string) string {
		if k == defaultRedisURLEnv {
			return "rediss://secret@redis:6380"
		}
		return ""
	}, &bytes.Buffer{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.leaderElect).To(BeFalse())
	g.Expect(o.watchNamespaces).To(BeEmpty(), "every namespace")
	g.Expect(o.defaults.FailureMode).To(Equal(v1alpha1.FailureModeOpen))
	g.Expect(o.defaults.RedisURL).To(Equal("rediss://secret@redis:6380"), "the URL can come from a Secret through the environment")
	g.Expect(o.metricsAddr).To(Equal(":8080"))
	g.Expect(o.probeAddr).To(Equal(":8081"))
}

func TestParseOptionsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--default-failure-mode", "open"}, `--default-failure-mode "open": use Open, Closed or LocalFallback`},
		{[]string{"--watch-namespaces", "Shop"}, `--watch-namespaces: "Shop" is not a namespace name`},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1"},
		{[]string{"--kube-api-qps", "0"}, "--kube-api-qps and --kube-api-burst must be positive"},
		{[]string{"shop"}, "sluice-manager takes flags only"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		_, err := parseOptions(tt.args, noEnv, &bytes.Buffer{})
		g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		g.Expect(exitCode(err)).To(Equal(2))
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	_, err := parseOptions([]string{"--help"}, noEnv, &out)
	g.Expect(err).To(MatchError(flag.ErrHelp))
	g.Expect(exitCode(err)).To(Equal(0))
	for _, name := range []string{"leader-elect", "health-probe-bind-address", "metrics-bind-address", "default-redis-url",
		"enforcer-image", "default-failure-mode", "watch-namespaces", "version", "kubeconfig", "zap-log-level", "kube-api-qps", "kube-api-burst", "concurrency"} {
		g.Expect(out.String()).To(MatchRegexp(`(?m)^  -` + name + `\b`))
	}
}
