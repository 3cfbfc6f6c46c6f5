package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/program"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestParseFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(g Gomega, o *options)
		wantErr string
	}{
		{
			name: "command line",
			args: []string{"--listen", "127.0.0.1:9080", "--upstream", "http://127.0.0.1:8080", "--config", "c.json", "--admin-listen=127.0.0.1:9901"},
			check: func(g Gomega, o *options) {
				g.Expect(o.listen).To(Equal("127.0.0.1:9080"))
				g.Expect(o.upstream.String()).To(Equal("http://127.0.0.1:8080"))
				g.Expect(o.configPath).To(Equal("c.json"))
				g.Expect(o.redisURL).To(Equal("redis://127.0.0.1:6379"))
				g.Expect(o.shutdownTimeout).To(Equal(25 * time.Second))
				g.Expect(o.localFallbackMaxEntries).To(Equal(100_000))
			},
		},
		{
			name: "environment fills what the command line leaves unset",
			args: []string{"--listen", "127.0.0.1:1"},
			env: map[string]string{"SLUICE_LISTEN": "127.0.0.1:2", "SLUICE_UPSTREAM": "http://app:8080", "SLUICE_POLICY_FILE": "a.yaml, b.yaml",
				"SLUICE_POD_NAME": "api-0", "SLUICE_SHUTDOWN_TIMEOUT": "3s", "SLUICE_REDIS_URL": "redis://r:6379/2",
				"SLUICE_LOCAL_FALLBACK_MAX_ENTRIES": "5000"},
			check: func(g Gomega, o *options) {
				g.Expect(o.listen).To(Equal("127.0.0.1:1"))
				g.Expect(o.upstream.Host).To(Equal("app:8080"))
				g.Expect(o.policyPaths).To(Equal([]string{"a.yaml", "b.yaml"}))
				g.Expect(o.podName).To(Equal("api-0"))
				g.Expect(o.shutdownTimeout).To(Equal(3 * time.Second))
				g.Expect(o.redisURL).To(Equal("redis://r:6379/2"))
				g.Expect(o.localFallbackMaxEntries).To(Equal(5000))
			},
		},
		{
			name:  "repeated policy files",
			args:  []string{"--upstream", "http://a", "--policy-file", "a.yaml", "--policy-file", "b.yaml"},
			check: func(g Gomega, o *options) { g.Expect(o.policyPaths).To(Equal([]string{"a.yaml", "b.yaml"})) },
		},
		{name: "no upstream", args: []string{"--config", "c"}, wantErr: "--upstream is required"},
		{name: "bad upstream", args: []string{"--config", "c", "--upstream", "127.0.0.1:8080"}, wantErr: `--upstream "127.0.0.1:8080" must be an http:// or https:// URL`},
		{name: "no config", args: []string{"--upstream", "http://a"}, wantErr: "one of --config or --policy-file is required"},
		{name: "both configs", args: []string{"--upstream", "http://a", "--config", "c", "--policy-file", "p"}, wantErr: "cannot be used together"},
		{name: "same listeners", args: []string{"--upstream", "http://a", "--config", "c", "--listen", ":1", "--admin-listen", ":1"}, wantErr: "are both :1"},
		{name: "unknown flag", args: []string{"--lisen", ":1"}, wantErr: "unknown flag: --lisen"},
		{name: "stray argument", args: []string{"--upstream", "http://a", "c.json"}, wantErr: `unexpected argument "c.json"`},
		{name: "bad duration from env", args: []string{"--upstream", "http://a", "--config", "c"}, env: map[string]string{"SLUICE_SHUTDOWN_TIMEOUT": "soon"}, wantErr: `SLUICE_SHUTDOWN_TIMEOUT="soon"`},
		{name: "bad redis URL", args: []string{"--upstream", "http://a", "--config", "c", "--redis-url", "http://r:6379"}, wantErr: `--redis-url: redis URL http://r:6379: scheme "http"`},
		{name: "no local fallback room", args: []string{"--upstream", "http://a", "--config", "c", "--local-fallback-max-entries", "0"}, wantErr: "--local-fallback-max-entries must be at least 1"},
		{name: "bad log level", args: []string{"--upstream", "http://a", "--config", "c", "--log-level", "loud"}, wantErr: `--log-level "loud"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o, _, err := parseFlags(tc.args, env(tc.env), &bytes.Buffer{})
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(err).To(MatchError(program.ErrUsage))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, o)
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		out    string
	}{
		{[]string{"--help"}, program.ExitOK, "Exit status: 0 after a clean shutdown"},
		{[]string{"--version"}, program.ExitOK, "sluice-enforcer "},
		{[]string{"--nope"}, program.ExitUsage, "unknown flag: --nope"},
		{[]string{"--upstream", "http://a", "--config", "/does/not/exist.json"}, program.ExitConfig, "invalid configuration: load config"},
	} {
		g := NewWithT(t)
		var out bytes.Buffer
		status := run(context.Background(), tc.args, env(nil), &out, &out)
		g.Expect(status).To(Equal(tc.status), out.String())
		g.Expect(out.String()).To(ContainSubstring(tc.out))
	}
}
