package main

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// TestASecondInstanceNamesTheFlagOfThePortHeld starts a second
// sluice-ratelimit on the host of a first: on the first's ports it exits,
// naming the flag and variables that move the port it could not bind;
// with its ports moved, it serves beside the first.
func TestASecondInstanceNamesTheFlagOfThePortHeld(t *testing.T) {
	g := NewWithT(t)
	rs := redistest.Start(t)
	dir := t.TempDir()
	writeFile(t, dir, "shop.yaml", "domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]\n")
	addrs, err := freeport.LoopbackAddrs(2)
	g.Expect(err).NotTo(HaveOccurred())
	httpAddr := addrs[0]
	first := startProgram(t, dir, rs.URL(), "--http-listen", httpAddr)

	second := func(grpcAddr, httpAddr, adminAddr string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, programBinary(t), "--config-dir", dir, "--redis-url", rs.URL(),
			"--listen", grpcAddr, "--http-listen", httpAddr, "--admin-listen", adminAddr)
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.String(), err
	}
	for _, c := range []struct {
		grpc, http, admin string
		want              []string
	}{
		{first.grpcAddr, httpAddr, first.adminAddr, []string{"gRPC listener", "--listen (or GRPC_HOST, GRPC_PORT)"}},
		{addrs[1], httpAddr, first.adminAddr, []string{"HTTP listener", "--http-listen (or HOST, PORT)", "address already in use"}},
		{addrs[1], "", first.adminAddr, []string{"admin listener", "--admin-listen (or DEBUG_HOST, DEBUG_PORT)"}},
	} {
		out, err := second(c.grpc, c.http, c.admin)
		var exit *exec.ExitError
		g.Expect(err).To(BeAssignableToTypeOf(exit), "the second instance exits: %s", out)
		for _, w := range c.want {
			g.Expect(out).To(ContainSubstring(w))
		}
	}

	// moved, it starts and serves beside the first
	moved, err := freeport.LoopbackAddrs(1)
	g.Expect(err).NotTo(HaveOccurred())
	p := startProgram(t, dir, rs.URL(), "--http-listen", moved[0])
	code, _ := p.get("/healthcheck")
	g.Expect(code).To(Equal(200))
}
