package proxy

import (
	"testing"
)

// BenchmarkUsageReader is the reader's cost per answer of about 1 MiB, as
// the copy loop feeds it (32 KiB writes); MB/s is of the plain answer.
func BenchmarkUsageReader(b *testing.B) {
	const size = 1<<20 - 4096
	for _, c := range []struct {
		name         string
		ct, encoding []string
		body         []byte
		plain        int
	}{
		{"json", []string{"application/json"}, nil, chatAnswer(size, 5000), size},
		{"stream", []string{"text/event-stream"}, nil, chatStream(size, 5000), size},
		{"gzip-json", []string{"application/json"}, []string{"gzip"}, gzipped(chatAnswer(size, 5000)), size},
		{"gzip-stream", []string{"text/event-stream"}, []string{"gzip"}, gzipped(chatStream(size, 5000)), size},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(c.plain))
			b.ReportAllocs()
			for b.Loop() {
				u := newUsageReader(c.ct, c.encoding)
				for k := 0; k < len(c.body); k += 32 << 10 {
					u.write(c.body[k:min(k+32<<10, len(c.body))])
				}
				u.finish()
				if n, reason := u.units("total_tokens"); n != 5000 {
					b.Fatal(n, reason)
				}
			}
		})
	}
}
