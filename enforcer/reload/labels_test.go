package reload

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseLabels(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr string
	}{
		{name: "empty file", in: "", want: map[string]string{}},
		{name: "kubelet output", in: "app=\"api\"\npod-template-hash=\"5d4f8c7b9\"\nsluice.dev/injection=\"enabled\"\n",
			want: map[string]string{"app": "api", "pod-template-hash": "5d4f8c7b9", "sluice.dev/injection": "enabled"}},
		{name: "escaped value", in: `note="a \"quoted\" \\ value\n"`, want: map[string]string{"note": "a \"quoted\" \\ value\n"}},
		{name: "empty value", in: `tier=""`, want: map[string]string{"tier": ""}},
		{name: "blank lines and CRLF", in: "\r\napp=\"api\"\r\n\r\n", want: map[string]string{"app": "api"}},
		{name: "no equals", in: "app", wantErr: `line 1: want key="value"`},
		{name: "unquoted value", in: "app=api", wantErr: `value of "app" must be double-quoted`},
		{name: "unterminated quote", in: `app="api`, wantErr: `is not a quoted string`},
		{name: "trailing garbage", in: `app="api"x`, wantErr: `is not a quoted string`},
		{name: "bad key", in: `-app="api"`, wantErr: `label key "-app"`},
		{name: "duplicate", in: "app=\"a\"\napp=\"b\"", wantErr: `line 2: label "app" appears twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseLabels([]byte(tc.in))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// kubeletFormat writes labels as the kubelet's downward API volume does.
func kubeletFormat(labels map[string]string) string {
	var out string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out += fmt.Sprintf("%s=%q\n", k, labels[k])
	}
	return out
}

func FuzzParseLabels(f *testing.F) {
	f.Add("app=\"api\"\ntier=\"web\"\n")
	f.Add(`note="\u00e9\t\"x\""`)
	f.Add("=\"\"")
	f.Add("a=\"\\")
	f.Fuzz(func(t *testing.T, in string) {
		labels, err := ParseLabels([]byte(in))
		if err != nil {
			return
		}
		// Whatever parses must survive the kubelet's own formatting.
		again, err := ParseLabels([]byte(kubeletFormat(labels)))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", kubeletFormat(labels), err)
		}
		if !maps.Equal(labels, again) {
			t.Fatalf("round trip changed %v into %v", labels, again)
		}
	})
}
