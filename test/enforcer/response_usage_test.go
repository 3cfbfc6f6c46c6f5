package enforcer

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// largeChat is an OpenAI chat completion of about size bytes reporting
// 5,000 tokens.
func largeChat(size int) []byte {
	content := strings.Repeat(`a \"quoted\" {word}\n`, size/22)
	return []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		content + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":4000,"total_tokens":5000}}`)
}

// largeStream is an OpenAI event stream of about size bytes whose last
// event reports 5,000 tokens.
func largeStream(size int) []byte {
	const event = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" token"}}],"usage":null}` + "\n\n"
	return []byte(strings.Repeat(event, size/len(event)) +
		`data: {"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":4000,"total_tokens":5000}}` + "\n\ndata: [DONE]\n\n")
}

func gzipBody(b []byte) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return z.Bytes()
}

// TestLargeAnswersAreChargedTheirUsage: answers far larger than any
// buffer, plain or gzip-encoded, JSON or event streams, charge the
// tenant the 5,000 tokens they report.
func TestLargeAnswersAreChargedTheirUsage(t *testing.T) {
	answers := map[string]struct {
		contentType string
		body        []byte
		gzip        bool
	}{
		"/plain-json":  {"application/json", largeChat(1_100_000), false},
		"/gzip-json":   {"application/json", gzipBody(largeChat(17 << 20)), true},
		"/gzip-stream": {"text/event-stream", gzipBody(largeStream(19_000_000)), true},
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			_, _ = io.WriteString(w, `{"usage":{"total_tokens":1}}`)
			return
		}
		w.Header().Set("Content-Type", a.contentType)
		if a.gzip {
			w.Header().Set("Content-Encoding", "gzip")
		}
		for body := a.body; len(body) > 0; {
			n := min(len(body), 16<<10)
			_, _ = w.Write(body[:n])
			w.(http.Flusher).Flush()
			body = body[n:]
		}
	}))
	t.Cleanup(app.Close)
	e := start(t, setup{upstream: app.URL, policies: policy("llm", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: llm
      algorithm: FixedWindow
      limits: [{requests: 100000, period: 1h}]
      responseCost: {jsonUsage: total_tokens}`)})

	charged := 0.0
	for path, a := range answers {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			g := NewWithT(t)
			tenant := uniqueTenant(t)
			req, _ := http.NewRequest(http.MethodPost, e.url+path, nil)
			k, v, _ := strings.Cut(tenant, ": ")
			req.Header.Set(k, v)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := client.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(a.body), "the client gets the answer as sent")

			charged += 5000
			g.Eventually(func() float64 {
				return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`)
			}).WithTimeout(10 * time.Second).Should(BeNumerically("==", charged))
			// 5,000 tokens and this request's 1 are gone from the window
			g.Expect(get(t, e.url+"/v1/models", tenant).header.Get("X-RateLimit-Remaining")).To(Equal(fmt.Sprint(100000 - 5000 - 1)))
			charged++ // the answer to /v1/models reports 1 token
		})
	}
	NewWithT(t).Expect(metricValue(t, e, "sluice_enforcer_response_reports_invalid_total")).To(BeZero())
}
