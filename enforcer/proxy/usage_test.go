package proxy

import (
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	sruntime "github.com/sluice-dev/sluice/enforcer/engine"
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

var (
	jsonType   = []string{"application/json"}
	streamType = []string{"text/event-stream; charset=utf-8"}
	gzipCE     = []string{"gzip"}
)

func TestUsageReaderFindsTheLastUsageWhateverTheChunks(t *testing.T) {
	g := NewWithT(t)
	body := chatStream(20<<10, 30)
	for _, n := range []int{1, 7, 64, 1 << 20} {
		u := feed(newUsageReader(streamType, nil), body, n)
		units, reason := u.units("total_tokens")
		g.Expect(reason).To(BeEmpty(), "chunks of %d", n)
		g.Expect(units).To(Equal(int64(30)))
		units, _ = u.units("completion_tokens")
		g.Expect(units).To(Equal(int64(24)))

		u = feed(newUsageReader(jsonType, gzipCE), gzipped(chatAnswer(20<<10, 30)), n)
		units, reason = u.units("total_tokens")
		g.Expect(reason).To(BeEmpty(), "gzip JSON in chunks of %d", n)
		g.Expect(units).To(Equal(int64(30)))
	}
}

// answersOfAnySize are well-formed answers far larger than anything the
// reader holds, each reporting 5,000 tokens.
func answersOfAnySize() map[string]struct {
	ct, encoding []string
	body         []byte
} {
	long := []byte(`data: {"choices":[{"delta":{"content":"` + strings.Repeat("a", 2<<20) + `"}}],` +
		`"usage":{"total_tokens":5000}}` + "\n\n")
	return map[string]struct {
		ct, encoding []string
		body         []byte
	}{
		"plain JSON of 1.1 MB":             {jsonType, nil, chatAnswer(1_100_000, 5000)},
		"plain JSON, usage before 20 MiB":  {jsonType, nil, padded(20<<20, 5000)},
		"gzip JSON expanding to 17 MiB":    {jsonType, gzipCE, gzipped(chatAnswer(17<<20, 5000))},
		"gzip event stream of 19 MB":       {streamType, gzipCE, gzipped(chatStream(19_000_000, 5000))},
		"event stream of 19 MB":            {streamType, nil, chatStream(19_000_000, 5000)},
		"usage in a stream line of 2 MiB":  {streamType, nil, long},
		"gzip stream, usage in 2 MiB line": {streamType, gzipCE, gzipped(long)},
	}
}

func TestUsageReaderReadsAnswersOfAnySize(t *testing.T) {
	for name, c := range answersOfAnySize() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			units, reason := feed(newUsageReader(c.ct, c.encoding), c.body, 32<<10).units("total_tokens")
			g.Expect(reason).To(BeEmpty())
			g.Expect(units).To(Equal(int64(5000)))
		})
	}
}

// TestUsageReaderMemoryDoesNotGrowWithTheAnswer: reading a 32 MiB answer
// allocates a few KiB, as a small one does, in every form.
func TestUsageReaderMemoryDoesNotGrowWithTheAnswer(t *testing.T) {
	for _, c := range []struct {
		name         string
		ct, encoding []string
		answer       func(size, total int) []byte
	}{
		{"json", jsonType, nil, chatAnswer},
		{"stream", streamType, nil, chatStream},
		{"gzip json", jsonType, gzipCE, chatAnswer},
		{"gzip stream", streamType, gzipCE, chatStream},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			allocated := func(body []byte) uint64 {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				units, reason := feed(newUsageReader(c.ct, c.encoding), body, 32<<10).units("total_tokens")
				runtime.ReadMemStats(&after)
				g.Expect(reason).To(BeEmpty())
				g.Expect(units).To(Equal(int64(5000)))
				return after.TotalAlloc - before.TotalAlloc
			}
			small, large := c.answer(64<<10, 5000), c.answer(32<<20, 5000)
			if c.encoding != nil {
				small, large = gzipped(small), gzipped(large)
			}
			// a gzip decoder is ~45 KiB, the rest a few KiB; the process's
			// other goroutines may add to the count, never 32 MiB
			s, l := allocated(small), allocated(large)
			g.Expect(l).To(BeNumerically("<", 256<<10), "%d bytes allocated for 32 MiB, %d for 64 KiB", l, s)
		})
	}
}

func TestUsageReaderReasons(t *testing.T) {
	g := NewWithT(t)
	plain := []byte(`{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3.0}}`)
	units, reason := feed(newUsageReader(jsonType, nil), plain, 5).units("total_tokens")
	g.Expect(reason).To(BeEmpty())
	g.Expect(units).To(Equal(int64(3)))

	bigUsage := `{"usage":{"total_tokens":5,"detail":"` + strings.Repeat("a", maxUsageObject) + `"}}`
	z := gzipped(plain)
	for _, c := range []struct {
		name         string
		ct, encoding []string
		body         string
		want         string
	}{
		{"no usage", jsonType, nil, `{"id":"x"}`, sruntime.ReportMissing},
		{"usage null", jsonType, nil, `{"usage":{"total_tokens":1},"usage":null}`, sruntime.ReportMissing},
		{"usage nested only", jsonType, nil, `{"choices":[{"usage":{"total_tokens":1}}]}`, sruntime.ReportMissing},
		{"an array", jsonType, nil, `[{"usage":{"total_tokens":1}}]`, sruntime.ReportMissing},
		{"empty", jsonType, nil, ``, sruntime.ReportMalformed},
		{"cut short", jsonType, nil, `{"usage":`, sruntime.ReportMalformed},
		{"cut after the usage", jsonType, nil, `{"usage":{"total_tokens":1},"x":[`, sruntime.ReportMalformed},
		{"not JSON after it", jsonType, nil, `{"usage":{"total_tokens":1}} x`, sruntime.ReportMalformed},
		{"usage a number", jsonType, nil, `{"usage":7}`, sruntime.ReportMalformed},
		{"field a string", jsonType, nil, `{"usage":{"total_tokens":"7"}}`, sruntime.ReportMalformed},
		{"negative", jsonType, nil, `{"usage":{"total_tokens":-1}}`, sruntime.ReportNegative},
		{"usage over 64 KiB", jsonType, nil, bigUsage, sruntime.ReportTooLarge},
		{"brotli", jsonType, []string{"br"}, string(plain), sruntime.ReportEncoding},
		{"not gzip", jsonType, gzipCE, string(plain), sruntime.ReportMalformed},
		{"gzip cut short", jsonType, gzipCE, string(z[:len(z)-10]), sruntime.ReportMalformed},
		{"gzip empty", jsonType, gzipCE, ``, sruntime.ReportMalformed},
		{"stream without usage", streamType, nil, "data: {\"usage\":null}\n\ndata: [DONE]\n\n", sruntime.ReportMissing},
		{"stream, last usage broken", streamType, nil,
			"data: {\"usage\":{\"total_tokens\":1}}\n\ndata: {\"usage\":{\"total_tokens\":2}} x\n\n", sruntime.ReportMalformed},
		{"stream, last usage too large", streamType, nil,
			"data: {\"usage\":{\"total_tokens\":1}}\n\ndata: " + bigUsage + "\n\n", sruntime.ReportTooLarge},
	} {
		_, reason := feed(newUsageReader(c.ct, c.encoding), []byte(c.body), 3).units("total_tokens")
		g.Expect(reason).To(Equal(c.want), c.name)
	}
}

// TestUsageReaderSeesAUsageBeforeTheAnswerBreaks: a usage read whole is
// told even when the answer then breaks off.
func TestUsageReaderSeesAUsageBeforeTheAnswerBreaks(t *testing.T) {
	g := NewWithT(t)
	for _, c := range []struct {
		ct, encoding []string
		body         []byte
	}{
		{jsonType, nil, []byte(`{"usage":{"total_tokens":40},"choices":[{"message":"cut`)},
		{streamType, nil, []byte("data: {\"usage\":{\"total_tokens\":40}}\n\ndata: {\"choi")},
		{streamType, gzipCE, gzipped([]byte("data: {\"usage\":{\"total_tokens\":40}}\n\ndata: {\"choices\":[]}\n\n"))[:60]},
	} {
		u := feed(newUsageReader(c.ct, c.encoding), c.body, 16)
		n, ok := u.seen("total_tokens")
		g.Expect(ok).To(BeTrue(), c.ct[0])
		g.Expect(n).To(Equal(int64(40)))
		if c.ct[0] != streamType[0] || c.encoding != nil {
			_, reason := u.units("total_tokens")
			g.Expect(reason).To(Equal(sruntime.ReportMalformed))
		}
	}
	u := feed(newUsageReader(jsonType, nil), []byte(`{"choices":[`), 4)
	_, ok := u.seen("total_tokens")
	g.Expect(ok).To(BeFalse())
}

// TestUsageReaderEventStreamLines: the event stream's own syntax, as
// browsers read it: any line ending, comments, other fields, an event of
// several data lines.
func TestUsageReaderEventStreamLines(t *testing.T) {
	g := NewWithT(t)
	for _, c := range []struct {
		body string
		want int64
	}{
		{"data:{\"usage\":{\"total_tokens\":1}}\r\rdata: [DONE]\r\r", 1},
		{": keep-alive\r\nevent: message\r\nid: 7\r\ndata: {\"usage\":\r\ndata:  {\"total_tokens\":2}}\r\n\r\n", 2},
		{"data: {\"usage\":{\"total_tokens\":3}}\n\ndata: {\"usage\":null}\n\ndatax: {\"usage\":{\"total_tokens\":9}}\n\n", 3},
		// an empty data line, then JSON: "\n{...}" is still JSON
		{"data: {\"usage\":{\"total_tokens\":3}}\n\ndata\ndata: {\"usage\":{\"total_tokens\":4}}\n\n", 4},
		// the stream ends with no blank line
		{"data: {\"usage\":{\"total_tokens\":5}}", 5},
		// a name with an escape, a usage after a null one
		{"data: {\"us\\u0061ge\":{\"total_tokens\":6}}\n\n", 6},
		{"data: {\"usage\": null, \"usage\" :\t{\"total_tokens\":7}}\n\n", 7},
	} {
		for _, n := range []int{1, 2, 5, 1000} {
			units, reason := feed(newUsageReader(streamType, nil), []byte(c.body), n).units("total_tokens")
			g.Expect(reason).To(BeEmpty(), "%q in chunks of %d", c.body, n)
			g.Expect(units).To(Equal(c.want), "%q in chunks of %d", c.body, n)
		}
	}
}

// TestUsageReaderEndsItsGzipDecoder: an answer that stops half way leaves
// no goroutine behind, whether the reader is finished or dropped.
func TestUsageReaderEndsItsGzipDecoder(t *testing.T) {
	g := NewWithT(t)
	decoders := func() int {
		runtime.GC() // a dropped reader's cleanup runs after a collection
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "proxy.inflate(")
	}
	half := gzipped(chatStream(1<<20, 5000))
	half = half[:len(half)/2]
	u := newUsageReader(streamType, gzipCE)
	u.write(half)
	g.Expect(decoders()).To(Equal(1))
	u.finish()
	g.Eventually(decoders).Should(BeZero())
	_, reason := u.units("total_tokens")
	g.Expect(reason).To(Equal(sruntime.ReportMalformed))

	func() {
		u := newUsageReader(streamType, gzipCE)
		u.write(half)
	}()
	g.Eventually(decoders).WithTimeout(10 * time.Second).Should(BeZero())
}

// BenchmarkUsageReaderStream is the cost of reading an event stream's
// usage alongside the copy, per byte of stream.
func BenchmarkUsageReaderStream(b *testing.B) {
	body := chatStream(64<<10, 30)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		u := newUsageReader(streamType, nil)
		for k := 0; k < len(body); k += 512 {
			u.write(body[k:min(k+512, len(body))])
		}
		u.finish()
		if n, _ := u.units("total_tokens"); n != 30 {
			b.Fatal(n)
		}
	}
}
