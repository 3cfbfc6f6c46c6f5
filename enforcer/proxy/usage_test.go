package proxy

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/runtime"
)

// feed writes body to a usage reader in pieces of n bytes, as a copy loop
// would, and finishes it.
func feed(u *usageReader, body []byte, n int) *usageReader {
	for len(body) > 0 {
		k := min(n, len(body))
		u.write(body[:k])
		body = body[k:]
	}
	u.finish()
	return u
}

func stream(events int) []byte {
	var b strings.Builder
	for range events {
		b.WriteString(usageEvent("token"))
	}
	b.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}` + "\r\n\r\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

func TestUsageReaderFindsTheLastUsageWhateverTheChunks(t *testing.T) {
	g := NewWithT(t)
	for _, n := range []int{1, 7, 64, 1 << 20} {
		u := feed(newUsageReader([]string{"text/event-stream; charset=utf-8"}, nil), stream(50), n)
		units, reason := u.units("total_tokens")
		g.Expect(reason).To(BeEmpty(), "chunks of %d", n)
		g.Expect(units).To(Equal(int64(30)))
		units, _ = u.units("completion_tokens")
		g.Expect(units).To(Equal(int64(20)))
	}
}

func TestUsageReaderStreamHoldsOneLineAtMost(t *testing.T) {
	g := NewWithT(t)
	long := "data: {\"x\":\"" + strings.Repeat("a", 2*maxUsageBody) + "\",\"usage\":{\"total_tokens\":99}}\n\n"
	body := append([]byte(long), stream(1)...)
	u := newUsageReader([]string{"text/event-stream"}, nil)
	for k := 0; k < len(body); k += 4096 {
		u.write(body[k:min(k+4096, len(body))])
		g.Expect(cap(u.buf)).To(BeNumerically("<=", 2*maxUsageBody), "a line longer than 1 MiB is dropped, not held")
	}
	u.finish()
	units, reason := u.units("total_tokens")
	g.Expect(reason).To(BeEmpty())
	g.Expect(units).To(Equal(int64(30)), "the line over 1 MiB is skipped; the last usage counts")
}

func TestUsageReaderPlainAndGzip(t *testing.T) {
	g := NewWithT(t)
	plain := []byte(`{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3.0}}`)
	units, reason := feed(newUsageReader([]string{"application/json"}, nil), plain, 5).units("total_tokens")
	g.Expect(reason).To(BeEmpty())
	g.Expect(units).To(Equal(int64(3)))

	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(stream(3))
	_ = zw.Close()
	units, reason = feed(newUsageReader([]string{"text/event-stream"}, []string{"gzip"}), z.Bytes(), 10).units("total_tokens")
	g.Expect(reason).To(BeEmpty(), "a gzip-encoded stream")
	g.Expect(units).To(Equal(int64(30)))

	for want, c := range map[string]struct {
		body     []byte
		encoding []string
	}{
		runtime.ReportMissing:   {[]byte(`{"id":"x"}`), nil},
		runtime.ReportMalformed: {[]byte(`{"usage":`), nil},
		runtime.ReportNegative:  {[]byte(`{"usage":{"total_tokens":-1}}`), nil},
		runtime.ReportTooLarge:  {[]byte(`{"pad":"` + strings.Repeat("a", maxUsageBody) + `"}`), nil},
		runtime.ReportEncoding:  {plain, []string{"br"}},
	} {
		_, reason := feed(newUsageReader([]string{"application/json"}, c.encoding), c.body, 4096).units("total_tokens")
		g.Expect(reason).To(Equal(want))
	}
}

// BenchmarkUsageReaderStream is the cost of reading an event stream's
// usage alongside the copy, per byte of stream.
func BenchmarkUsageReaderStream(b *testing.B) {
	body := stream(500)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		u := newUsageReader([]string{"text/event-stream"}, nil)
		for k := 0; k < len(body); k += 512 {
			u.write(body[k:min(k+512, len(body))])
		}
		u.finish()
		if n, _ := u.units("total_tokens"); n != 30 {
			b.Fatal(n)
		}
	}
}
