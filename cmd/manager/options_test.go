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
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

func TestParseOptions(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	o, err := parseOptions([]string{
		"--leader-elect", "--watch-namespaces", "shop, billing", "--default-failure-mode", "LocalFallback",
		"--enforcer-image", "sluice-enforcer:v1", "--default-redis-url", "redis://redis:6379",
		"--pprof-bind-address", "127.0.0.1:6060",
	}, &out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.leaderElect).To(BeTrue())
	g.Expect(o.watchNamespaces).To(Equal([]string{"shop", "billing"}))
	g.Expect(o.defaults.FailureMode).To(Equal(v1alpha1.FailureModeLocalFallback))
	g.Expect(o.defaults.EnforcerImage).To(Equal("sluice-enforcer:v1"))
	g.Expect(o.defaults.RedisURL).To(Equal("redis://redis:6379"))
	g.Expect(o.pprofAddr).To(Equal("127.0.0.1:6060"))
}

func TestDefaultRedisSecret(t *testing.T) {
	tests := []struct {
		value, name, key string
	}{
		{"redis", "redis", "url"},
		{"redis:address", "redis", "address"},
		{"shared.redis:url.txt", "shared.redis", "url.txt"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		o, err := parseOptions([]string{"--default-redis-secret", tt.value}, &bytes.Buffer{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.defaults.RedisSecret).To(Equal(&corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: tt.name}, Key: tt.key}))
	}
}

func TestParseOptionsDefaults(t *testing.T) {
	g := NewWithT(t)
	o, err := parseOptions(nil, &bytes.Buffer{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.leaderElect).To(BeFalse())
	g.Expect(o.watchNamespaces).To(BeEmpty(), "every namespace")
	g.Expect(o.defaults.FailureMode).To(Equal(v1alpha1.FailureModeOpen))
	g.Expect(o.defaults.RedisURL).To(BeEmpty())
	g.Expect(o.defaults.RedisSecret).To(BeNil())
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
		{[]string{"--default-redis-secret", "Redis:url"}, `--default-redis-secret "Redis:url"`},
		{[]string{"--default-redis-secret", "redis:a/b"}, "write NAME or NAME:KEY"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		_, err := parseOptions(tt.args, &bytes.Buffer{})
		g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		g.Expect(exitCode(err)).To(Equal(2))
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	_, err := parseOptions([]string{"--help"}, &out)
	g.Expect(err).To(MatchError(flag.ErrHelp))
	g.Expect(exitCode(err)).To(Equal(0))
	for _, name := range []string{"leader-elect", "health-probe-bind-address", "metrics-bind-address", "default-redis-url",
		"enforcer-image", "default-failure-mode", "default-redis-secret", "watch-namespaces", "version", "kubeconfig", "zap-log-level", "kube-api-qps", "kube-api-burst", "concurrency"} {
		g.Expect(out.String()).To(MatchRegexp(`(?m)^  -` + name + `\b`))
	}
}
