package config

import (
	"os"
	"testing"
)

// FuzzParse feeds the loader arbitrary bytes: it must answer with a
// configuration that validates, or an error, and never panic; whatever it
// accepts it accepts again with the same hash, and can select a pod's
// policies from.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/shop.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(`{"schema":"sluice.dev/enforcer-config/v1","namespace":"a","policies":[]}`))
	f.Add([]byte(`{"schema":"sluice.dev/enforcer-config/v1","namespace":"a","policies":[{"name":"p","rules":[{"name":"r","limits":[{"requests":1,"period":"-1s"}]}]}]}`))
	f.Add([]byte(`{"schema":"sluice.dev/enforcer-config/v1"} trailing`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a configuration that does not validate: %v", err)
		}
		again, err := Parse(data)
		if err != nil {
			t.Fatalf("accepted once, refused the second time: %v", err)
		}
		if c.Hash() != again.Hash() {
			t.Fatal("one input, two hashes")
		}
		if err := c.ForPod(map[string]string{"app": "api"}).Validate(); err != nil {
			t.Fatalf("a pod's share of a valid configuration does not validate: %v", err)
		}
	})
}
