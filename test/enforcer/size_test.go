package enforcer

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/bulkpolicy"
)

// compileOverrides compiles bulkpolicy's policy of n overrides for
// namespace ns with sluice-policy-compile, as the operator would.
func compileOverrides(t *testing.T, ns string, n int) []byte {
	t.Helper()
	doc, err := yaml.Marshal(bulkpolicy.Overrides(ns, "many-overrides", n))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(filepath.Dir(binary), "sluice-policy-compile"), "--namespace", ns, file).Output()
	if err != nil {
		t.Fatalf("sluice-policy-compile: %v", err)
	}
	return out
}

// TestCompressedConfiguration swaps a plain configuration for a compressed
// one of 10,000 overrides, as the kubelet swaps a ConfigMap volume whose
// key changed: the enforcer applies the override at the end of the list.
// A compressed file that is broken, or inflates past the bound, keeps that
// configuration in service and says why.
func TestCompressedConfiguration(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	e := start(t, setup{config: compiledConfig(ns, 1, 100000)})
	g.Expect(get(t, e.url, "X-Tenant-ID: "+bulkpolicy.Tenant(9999)).header.Get("X-RateLimit-Limit")).To(Equal("100000"))

	large := compileOverrides(t, ns, 10000)
	parsed, err := config.Parse(large)
	g.Expect(err).NotTo(HaveOccurred())
	hash := parsed.Hash()
	compressed := e.configPath + config.CompressedSuffix
	g.Expect(os.WriteFile(compressed, config.Compress(large), 0o644)).To(Succeed())
	g.Expect(os.Remove(e.configPath)).To(Succeed())
	last := "X-Tenant-ID: " + bulkpolicy.Tenant(9999)
	g.Eventually(func() string { return get(t, e.url, last).header.Get("X-RateLimit-Limit") }, 10*time.Second, 50*time.Millisecond).
		Should(Equal(strconv.Itoa(bulkpolicy.LastOverrideLimit)))
	g.Expect(status(t, e).Config.Hash).To(Equal(hash), "the hash is the document's")
	expectRefusedAfter(g, t, e.url, last, bulkpolicy.LastOverrideLimit-1)
	g.Expect(get(t, e.url, "X-Tenant-ID: "+bulkpolicy.Tenant(9998)).header.Get("X-RateLimit-Limit")).To(Equal("10998"))
	g.Expect(get(t, e.url, "X-Tenant-ID: someone-else").header.Get("X-RateLimit-Limit")).To(Equal(strconv.Itoa(bulkpolicy.RuleLimit)))

	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	_, _ = zw.Write(make([]byte, config.MaxDocumentBytes+1))
	g.Expect(zw.Close()).To(Succeed())
	for i, bad := range [][]byte{bomb.Bytes(), config.Compress(large)[:1000]} {
		g.Expect(os.WriteFile(compressed, bad, 0o644)).To(Succeed())
		g.Eventually(func() int64 { return status(t, e).Config.ReloadErrors }, 10*time.Second, 50*time.Millisecond).Should(Equal(int64(i + 1)))
		g.Expect(status(t, e).Config.LastReloadError).To(ContainSubstring("config.json.gz: decompress"))
		g.Expect(status(t, e).Config.Hash).To(Equal(hash), "the last good configuration stays")
		g.Expect(get(t, e.url, last).status).To(Equal(429), "and so does its override")
	}
}

// expectRefusedAfter sends requests as header until one is refused, which
// must be after exactly allowed more were admitted.
func expectRefusedAfter(g *WithT, t *testing.T, url, header string, allowed int) {
	for i := range allowed {
		g.Expect(get(t, url, header).status).To(Equal(200), "request %d", i+1)
	}
	g.Expect(get(t, url, header).status).To(Equal(429))
}
