package stack

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/reload"
)

// A volume is updated like a ConfigMap volume: files are links through
// ..data, which one rename switches to the new set.
func TestWriteVolume(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "sluice-config")

	g.Expect(writeVolume(dir, map[string][]byte{})).To(Succeed())
	_, err := os.Stat(filepath.Join(dir, "config.json"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "an optional ConfigMap that does not exist yet is an empty volume")

	g.Expect(writeVolume(dir, map[string][]byte{"config.json": []byte("v1"), "extra": []byte("x")})).To(Succeed())
	g.Expect(os.ReadFile(filepath.Join(dir, "config.json"))).To(Equal([]byte("v1")))
	first, err := os.Readlink(filepath.Join(dir, "..data"))
	g.Expect(err).NotTo(HaveOccurred())
	link, err := os.Readlink(filepath.Join(dir, "config.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link).To(Equal(filepath.Join("..data", "config.json")))

	g.Expect(writeVolume(dir, map[string][]byte{"config.json": []byte("v1"), "extra": []byte("x")})).To(Succeed())
	g.Expect(os.Readlink(filepath.Join(dir, "..data"))).To(Equal(first), "the same files are not written again")

	g.Expect(writeVolume(dir, map[string][]byte{"config.json": []byte("v2")})).To(Succeed())
	g.Expect(os.ReadFile(filepath.Join(dir, "config.json"))).To(Equal([]byte("v2")))
	_, err = os.Lstat(filepath.Join(dir, "extra"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "a key gone from the ConfigMap is gone from the volume")
	_, err = os.Stat(filepath.Join(dir, first))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the previous files are removed")
}

// The labels file reads back as the enforcer reads the downward API's.
func TestDownwardLabels(t *testing.T) {
	g := NewWithT(t)
	labels := map[string]string{"app.kubernetes.io/name": "public-api", "quote": `a "b"`, "empty": ""}
	data := downwardLabels(labels)
	g.Expect(string(data)).To(Equal("app.kubernetes.io/name=\"public-api\"\nempty=\"\"\nquote=\"a \\\"b\\\"\""))
	parsed, err := reload.ParseLabels(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed).To(Equal(labels))
}
