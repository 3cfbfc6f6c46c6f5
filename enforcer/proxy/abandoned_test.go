package proxy

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

// TestOfferReadable: the application is offered gzip only when the client
// takes it, else identity; never what the client named beyond those.
func TestOfferReadable(t *testing.T) {
	for _, tc := range []struct {
		client []string
		want   string
	}{
		{nil, "identity"},
		{[]string{"br"}, "identity"},
		{[]string{"gzip, deflate, br, zstd"}, "gzip"},
		{[]string{"br", "GZIP;q=0.5"}, "gzip"},
		{[]string{"gzip;q=0, br"}, "identity"},
		{[]string{"*"}, "gzip"},
		{[]string{"*;q=0.1, gzip;q=0"}, "identity"},
		{[]string{"gzip;q=nonsense"}, "identity"},
		{[]string{"x-gzip"}, "gzip"},
	} {
		g := NewWithT(t)
		hdr := http.Header{}
		if tc.client != nil {
			hdr["Accept-Encoding"] = tc.client
		}
		offerReadable(hdr)
		g.Expect(hdr["Accept-Encoding"]).To(Equal([]string{tc.want}), "%q", tc.client)
	}
}
