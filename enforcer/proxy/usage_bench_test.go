package proxy

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU the process has used, all its goroutines: a gzip
// answer is decoded in a goroutine of its own, beside the copy.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkUsageReader is the reader's cost per answer as the copy loop
// feeds it (32 KiB writes); MB/s is of the plain answer. B/op is the same
// for 1 and 16 MiB: what the reader holds does not grow with the answer.
// cpu-ms/MiB is the CPU of the whole process per MiB of plain answer.
func BenchmarkUsageReader(b *testing.B) {
	for _, size := range []int{1, 16} {
		plain := size<<20 - 4096
		for _, c := range []struct {
			name         string
			ct, encoding []string
			body         []byte
		}{
			{"json", jsonType, nil, chatAnswer(plain, 5000)},
			{"stream", streamType, nil, chatStream(plain, 5000)},
			{"gzip-json", jsonType, gzipCE, gzipped(chatAnswer(plain, 5000))},
			{"gzip-stream", streamType, gzipCE, gzipped(chatStream(plain, 5000))},
		} {
			b.Run(fmt.Sprintf("%s-%dMiB", c.name, size), func(b *testing.B) {
				b.SetBytes(int64(plain))
				b.ReportAllocs()
				cpu := cpuTime()
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
				b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N)/float64(plain)*(1<<20), "cpu-ms/MiB")
			})
		}
	}
}
