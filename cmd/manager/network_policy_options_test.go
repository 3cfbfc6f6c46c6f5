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
	"io"
	"testing"

	. "github.com/onsi/gomega"
)

func TestNetworkPolicyFlags(t *testing.T) {
	g := NewWithT(t)
	o, err := parseOptions(nil, io.Discard)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.networkPolicy).To(BeNil(), "off by default")

	o, err = parseOptions([]string{"--enforcer-network-policy", "--enforcer-admin-port=15081",
		"--enforcer-network-policy-manager-namespace=sluice-system",
		"--enforcer-network-policy-manager-labels=app.kubernetes.io/name=sluice,app.kubernetes.io/instance=sluice",
		"--enforcer-network-policy-metrics-namespaces=kubernetes.io/metadata.name=monitoring"}, io.Discard)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.networkPolicy).NotTo(BeNil())
	g.Expect(o.networkPolicy.AdminPort).To(Equal(int32(15081)))
	g.Expect(o.networkPolicy.ManagerPodLabels).To(HaveKeyWithValue("app.kubernetes.io/instance", "sluice"))
	g.Expect(o.networkPolicy.MetricsNamespaces.MatchLabels).To(HaveKeyWithValue("kubernetes.io/metadata.name", "monitoring"))

	_, err = parseOptions([]string{"--enforcer-network-policy"}, io.Discard)
	g.Expect(err).To(MatchError(ContainSubstring("--enforcer-network-policy-manager-namespace")))
	g.Expect(err).To(MatchError(ContainSubstring("--enforcer-network-policy-manager-labels")))
}
