package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/enforcer/rls"
)

// headerOptions are the rate limit headers responses ask Envoy to add.
type headerOptions struct {
	families string // --response-headers
	erlNames string // --erl-header-names
	parsed   rls.ResponseHeaders
}

func addHeaderFlags(fs *pflag.FlagSet, h *headerOptions) {
	fs.StringVar(&h.families, "response-headers", "none", "rate limit headers Envoy adds to responses (response_headers_to_add), comma-separated: "+
		"erl (envoyproxy/ratelimit's limit, remaining and reset of the descriptor closest to its limit), "+
		"x-ratelimit (X-RateLimit-Limit, -Remaining, -Reset in Unix seconds, as the enforcer), "+
		"ietf (RateLimit-Policy and RateLimit structured fields, as the enforcer), all, or none; "+
		"any of them adds Retry-After to a refusal (env LIMIT_RESPONSE_HEADERS_ENABLED=true is erl)")
	fs.StringVar(&h.erlNames, "erl-header-names", strings.Join([]string{rls.DefaultERLLimitHeader, rls.DefaultERLRemainingHeader, rls.DefaultERLResetHeader}, ","),
		"names of erl's limit, remaining and reset headers (env LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER)")
}

// headersFromEnv fills the header flags not given from envoyproxy/ratelimit's
// variables.
func headersFromEnv(fs *pflag.FlagSet, h *headerOptions, env func(string) string) error {
	if v := env("LIMIT_RESPONSE_HEADERS_ENABLED"); v != "" && !fs.Changed("response-headers") {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("LIMIT_RESPONSE_HEADERS_ENABLED=%q: %w", v, err)
		}
		if on {
			h.families = "erl"
		}
	}
	if !fs.Changed("erl-header-names") {
		names := strings.Split(h.erlNames, ",")
		for i, name := range []string{"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"} {
			if v := env(name); v != "" {
				names[i] = v
			}
		}
		h.erlNames = strings.Join(names, ",")
	}
	return nil
}

// validate parses the header flags into parsed.
func (h *headerOptions) validate() error {
	var p rls.ResponseHeaders
	for _, f := range strings.Split(h.families, ",") {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "erl":
			p.ERL = true
		case "x-ratelimit":
			p.XRateLimit = true
		case "ietf":
			p.IETF = true
		case "all":
			p.ERL, p.XRateLimit, p.IETF = true, true, true
		case "none", "":
		default:
			return fmt.Errorf("--response-headers %q: %q is not one of erl, x-ratelimit, ietf, all, none", h.families, f)
		}
	}
	names := strings.Split(h.erlNames, ",")
	if len(names) != 3 {
		return fmt.Errorf("--erl-header-names %q: want three names: limit, remaining, reset", h.erlNames)
	}
	p.ERLLimit, p.ERLRemaining, p.ERLReset = strings.TrimSpace(names[0]), strings.TrimSpace(names[1]), strings.TrimSpace(names[2])
	if err := p.Validate(); err != nil {
		return fmt.Errorf("--response-headers, --erl-header-names: %w", err)
	}
	h.parsed = p
	return nil
}
