// Package sfv reads rate limit headers back as RFC 9651 Structured Field
// Lists, for the tests of the code that writes them.
package sfv

import (
	"github.com/dunglas/httpsfv"
	"github.com/onsi/gomega"
)

// List parses value as a Structured Field List and returns each member's
// name and parameters, failing g on anything else, and on a value not
// written in canonical form.
func List(g gomega.Gomega, value string) []map[string]any {
	list, err := httpsfv.UnmarshalList([]string{value})
	g.Expect(err).NotTo(gomega.HaveOccurred(), value)
	canonical, err := httpsfv.Marshal(list)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(value).To(gomega.Equal(canonical), "written in canonical form")
	var out []map[string]any
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		g.Expect(ok).To(gomega.BeTrue(), "a list of items")
		fields := map[string]any{"name": item.Value}
		for _, k := range item.Params.Names() {
			fields[k], _ = item.Params.Get(k)
		}
		out = append(out, fields)
	}
	return out
}
