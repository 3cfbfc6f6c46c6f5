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
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func TestInjectionOptions(t *testing.T) {
	g := NewWithT(t)
	o, err := parseOptions([]string{
		"--enforcer-image", "sluice-enforcer:v1", "--enforcer-http-port", "18080", "--enforcer-cpu-limit", "500m",
		"--enforcer-memory-request", "", "--webhook-failure-policy", "Fail", "--webhook-timeout", "3s",
		"--default-redis-secret", "redis:address", "--webhook-cert-self-managed=false",
		"--enforcer-arg", "--body-timeout=10m", "--enforcer-arg=--response-header-timeout=5m",
		"--enforcer-arg=--local-fallback-max-entries=500000", "--enforcer-max-procs", "4",
	}, &bytes.Buffer{})
	g.Expect(err).NotTo(HaveOccurred())
	s := o.injection.sidecar(o.defaults)
	g.Expect(s.Image).To(Equal("sluice-enforcer:v1"))
	g.Expect(s.HTTPPort).To(BeEquivalentTo(18080))
	g.Expect(s.AdminPort).To(BeEquivalentTo(15081))
	g.Expect(s.MaxProcs).To(Equal(4))
	g.Expect(s.Resources.Requests).To(Equal(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}), "an empty value sets nothing")
	g.Expect(s.Resources.Limits).To(Equal(corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}))
	g.Expect(s.DefaultRedisSecret).To(HaveField("Key", "address"))
	g.Expect(s.ExtraArgs).To(Equal([]string{"--body-timeout=10m", "--response-header-timeout=5m", "--local-fallback-max-entries=500000"}))
	g.Expect(o.injection.webhookFailurePolicy).To(Equal(admissionregistrationv1.Fail))
	g.Expect(o.injection.webhookTimeoutSeconds).To(BeEquivalentTo(3))
	certs := o.injection.certificates()
	g.Expect(certs.SelfManaged).To(BeFalse())
	g.Expect(certs.Secret).To(Equal(types.NamespacedName{Namespace: "sluice-system", Name: "sluice-webhook-server-cert"}))
}

func TestInjectionOptionsDefaults(t *testing.T) {
	g := NewWithT(t)
	o, err := parseOptions(nil, &bytes.Buffer{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.injection.webhookFailurePolicy).To(Equal(admissionregistrationv1.Ignore), "a webhook outage never blocks pods")
	g.Expect(o.injection.webhookTimeoutSeconds).To(BeEquivalentTo(5))
	g.Expect(o.injection.certificates().SelfManaged).To(BeTrue())
	g.Expect(o.injection.sidecar(o.defaults).MaxProcs).To(Equal(2), "a sidecar's threads are bounded unless the operator says otherwise")
}

func TestInjectionOptionsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--webhook-failure-policy", "ignore"}, `--webhook-failure-policy "ignore": use Ignore or Fail`},
		{[]string{"--webhook-timeout", "1500ms"}, "whole seconds from 1s to 30s"},
		{[]string{"--enforcer-admin-port", "15080"}, "--enforcer-http-port and --enforcer-admin-port are both 15080"},
		{[]string{"--enforcer-memory-limit", "lots"}, `--enforcer-memory-limit "lots"`},
		{[]string{"--webhook-cert-secret", "sluice-webhook-server-cert"}, "write NAMESPACE/NAME"},
		{[]string{"--default-redis-url", "redis://:hunter2@redis:6379"}, "--default-redis-url: the default Redis URL carries a password"},
		{[]string{"--enforcer-arg", "--upstream=http://evil"}, `--enforcer-arg "--upstream=http://evil": write --NAME=VALUE with NAME one of`},
		{[]string{"--enforcer-arg", "body-timeout=1m"}, `--enforcer-arg "body-timeout=1m"`},
		{[]string{"--enforcer-arg", "--body-timeout"}, `--enforcer-arg "--body-timeout"`},
		{[]string{"--enforcer-max-procs", "-1"}, "--enforcer-max-procs -1: use 0 (Go's default) to 256"},
		{[]string{"--enforcer-max-procs", "1000"}, "--enforcer-max-procs 1000"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		_, err := parseOptions(tt.args, &bytes.Buffer{})
		g.Expect(err).To(MatchError(ContainSubstring(tt.want)), "%v", tt.args)
	}
}
