package config

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// FuzzParse feeds the loader arbitrary bytes: it must answer with a
// configuration or an error, and never panic. Whatever it accepts, it
// accepts again once encoded, as the same configuration (the operator writes
// json.Marshal's bytes, and the enforcer reports their hash); and nothing
// but white space may follow it.
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
		encoded, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("an accepted configuration does not encode: %v", err)
		}
		again, err := Parse(encoded)
		if err != nil {
			t.Fatalf("accepted, then refused once encoded: %v\n%s", err, encoded)
		}
		if reencoded, _ := json.Marshal(again); !bytes.Equal(reencoded, encoded) {
			t.Fatalf("encoding changes the configuration:\n%s\n%s", encoded, reencoded)
		}
		if c.Hash() != HashJSON(encoded) {
			t.Fatal("Hash is not the hash of the encoded configuration")
		}
		for _, tail := range []string{"}", "]", "0", `"`} {
			if _, err := Parse(append(slices.Clone(data), tail...)); err == nil {
				t.Fatalf("accepted with %q after the document", tail)
			}
		}
	})
}
