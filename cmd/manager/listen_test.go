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
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestAHeldPortNamesItsFlag binds the manager's listeners on a port
// another program holds (kubebuilder's 8080 and 8081 commonly are): the
// error names the flag that moves the port. The metrics listener is
// controller-runtime's own server, bound as the manager binds it.
func TestAHeldPortNamesItsFlag(t *testing.T) {
	g := NewWithT(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer held.Close()
	addr := held.Addr().String()

	o, err := parseOptions([]string{"--metrics-bind-address", addr}, io.Discard)
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := metricsserver.NewServer(metricsserver.Options{BindAddress: o.metricsAddr}, &rest.Config{}, http.DefaultClient)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.explainListen(srv.Start(context.Background()))).To(MatchError(ContainSubstring(
		"the metrics listener cannot bind " + addr + "; if another program holds the port, move it with --metrics-bind-address")))

	o, err = parseOptions([]string{"--health-probe-bind-address", addr}, io.Discard)
	g.Expect(err).NotTo(HaveOccurred())
	_, lerr := net.Listen("tcp", o.probeAddr)
	g.Expect(o.explainListen(fmt.Errorf("error listening on %s: %w", addr, lerr))).To(MatchError(ContainSubstring(
		"move it with --health-probe-bind-address")))
}
