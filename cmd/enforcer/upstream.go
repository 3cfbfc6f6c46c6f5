package main

import (
	"net/url"
	"strconv"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// noteUpstreamPorts says, once at start, which policies' upstreamPort a
// standalone enforcer does not use: it forwards to --upstream, while only
// the injected sidecar is given 127.0.0.1:<upstreamPort> as its --upstream.
func (e *enforcer) noteUpstreamPorts(cfg *config.Config) {
	if len(e.o.policyPaths) == 0 {
		return
	}
	e.upstreamNoted.Do(func() {
		port := upstreamPort(e.o.upstream)
		for _, p := range cfg.Policies {
			if p.UpstreamPort != 0 && p.UpstreamPort != port {
				e.log.Warn("the policy's upstreamPort is not used: this enforcer forwards every allowed request to --upstream",
					"policy", p.Name, "upstreamPort", p.UpstreamPort, "upstream", e.o.upstream.String())
			}
		}
	})
}

// upstreamPort is u's port, or its scheme's.
func upstreamPort(u *url.URL) int32 {
	if p, err := strconv.ParseInt(u.Port(), 10, 32); err == nil {
		return int32(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}
