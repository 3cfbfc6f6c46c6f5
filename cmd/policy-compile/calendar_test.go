package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// An unknown time zone passes the CRD's shape check; --policy-file refuses
// it as the compiler does, naming the zone, and the enforcer does not start.
func TestPolicyFileRefusesAnUnknownTimeZone(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	g.Expect(os.WriteFile(path, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: plans}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: plan
      algorithm: FixedWindow
      limits: [{requests: 10000, calendar: {unit: Month, timeZone: Mars/Olympus_Mons}}]
`), 0o644)).To(Succeed())
	var stderr bytes.Buffer
	var stdout bytes.Buffer
	status := run([]string{path}, &stdout, &stderr)
	g.Expect(status).To(Equal(exitRefused), stderr.String())
	g.Expect(stdout.String()).To(BeEmpty())
	g.Expect(stderr.String()).To(ContainSubstring(`spec.rules[0](plan).limits[0].calendar.timeZone: time zone "Mars/Olympus_Mons" is not a known IANA time zone name`))
}
