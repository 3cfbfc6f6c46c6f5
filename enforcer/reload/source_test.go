package reload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// A Source with a LoadFunc (cmd/enforcer's policy file compiler) is
// watched through its Files and reloaded like the operator's file; a load
// that fails keeps the configuration in service.
func TestSourceWithALoadFunc(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "requests")
	writeFile(t, path, "10")
	load := func() (*config.Config, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var n int
		if _, err := fmt.Sscan(string(data), &n); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return config.Parse([]byte(configJSON("api", n)))
	}
	rec := &recorder{}
	r := NewReloader(&Source{Load: load, Files: []string{path}}, rec.apply, rec, quietLog())
	g.Expect(r.Start()).To(Succeed())
	g.Expect(rec.limit()).To(Equal(int64(10)))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Expect(r.Watch(ctx, 50*time.Millisecond)).To(Succeed())
	writeFile(t, path, "twenty")
	g.Eventually(func() int64 { return r.State().Errors }, 2*time.Second, 20*time.Millisecond).Should(Equal(int64(1)))
	g.Expect(r.State().LastError).To(ContainSubstring("requests"))
	g.Expect(rec.limit()).To(Equal(int64(10)), "the last good configuration stays")
	writeFile(t, path, "20")
	g.Eventually(rec.limit, 2*time.Second, 20*time.Millisecond).Should(Equal(int64(20)))

	g.Expect(NewReloader(&Source{ConfigPath: path, Load: load}, rec.apply, nil, quietLog()).Start()).
		To(MatchError(ContainSubstring("a ConfigPath or a Load function, not both")))
}
