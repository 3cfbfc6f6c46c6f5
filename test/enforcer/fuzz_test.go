package enforcer

import (
	"os"
	"testing"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// FuzzConfigParse feeds the config loader arbitrary bytes: it must return a
// configuration or an error, never panic, and whatever it accepts must
// survive its own hash and a second parse of the same bytes.
func FuzzConfigParse(f *testing.F) {
	if seed, err := os.ReadFile("../../enforcer/config/testdata/shop.json"); err == nil {
		f.Add(seed)
	}
	f.Add([]byte(compiledConfig("shop", 1, 10)))
	f.Add([]byte(`{"schema": "sluice.dev/enforcer-config/v1", "namespace": "x", "policies": []}`))
	f.Add([]byte(`{"schema": "sluice.dev/enforcer-config/v1", "namespace": "x", "policies": [{"name": "p", "timeout": "1x"}]}`))
	f.Add([]byte(`{"schema": 1}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data)
		if err != nil {
			return
		}
		again, err := config.Parse(data)
		if err != nil {
			t.Fatalf("accepted once, refused the second time: %v", err)
		}
		if c.Hash() != again.Hash() {
			t.Fatalf("one input, two hashes")
		}
		c.ForPod(map[string]string{"app": "api"})
	})
}
