package proxy

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/runtime"
)

// maxUsageBody is the most of an answer held to find its usage: the
// whole of a plain JSON answer, the gzip-encoded bytes of a compressed
// one, one line of an event stream.
const maxUsageBody = 1 << 20

// usageReader finds the usage object of an OpenAI-compatible answer in
// the bytes copied to the client, without holding them back: usage of a
// plain JSON answer, or of the last data event that has one in an event
// stream (stream_options.include_usage).
type usageReader struct {
	stream bool // text/event-stream
	gzip   bool
	// failed is the reason no usage can be found, once known.
	failed string
	buf    []byte // the plain answer, the compressed one, or a stream's current line
	// skipping drops the rest of a stream line longer than maxUsageBody.
	skipping bool
	usage    map[string]json.RawMessage
}

// newUsageReader reads an answer of these Content-Type and
// Content-Encoding values.
func newUsageReader(contentType, encoding []string) *usageReader {
	u := &usageReader{stream: isEventStream(contentType)}
	switch enc := strings.ToLower(strings.TrimSpace(strings.Join(encoding, ","))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		u.gzip = true
	default:
		u.failed = runtime.ReportEncoding
	}
	return u
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(ct []string) bool {
	if len(ct) == 0 {
		return false
	}
	v, _, _ := strings.Cut(ct[0], ";")
	return strings.EqualFold(strings.TrimSpace(v), "text/event-stream")
}

// write takes the next bytes of the body, as they go to the client.
func (u *usageReader) write(p []byte) {
	if u.failed != "" {
		return
	}
	if u.stream && !u.gzip {
		u.scanLines(p)
		return
	}
	if len(u.buf)+len(p) > maxUsageBody {
		u.failed, u.buf = runtime.ReportTooLarge, nil
		return
	}
	u.buf = append(u.buf, p...)
}

// scanLines feeds a stream's bytes line by line, holding one line at most.
func (u *usageReader) scanLines(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !u.skipping {
			if len(u.buf)+len(chunk) > maxUsageBody {
				u.skipping, u.buf = true, u.buf[:0]
			} else {
				u.buf = append(u.buf, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !u.skipping {
			u.line(u.buf)
		}
		u.skipping, u.buf = false, u.buf[:0]
		p = p[i+1:]
	}
}

// line reads one line of an event stream: a data field with a usage
// object replaces the one found before.
func (u *usageReader) line(l []byte) {
	l = bytes.TrimSuffix(l, []byte("\r"))
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok || !hasUsageObject(data) {
		return // most events of a stream: "usage":null, or none
	}
	var event struct {
		Usage map[string]json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &event) == nil && event.Usage != nil {
		u.usage = event.Usage
	}
}

// finish reads what was held once the body has ended.
func (u *usageReader) finish() {
	if u.failed != "" {
		return
	}
	body := u.buf
	if u.gzip {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			u.failed = runtime.ReportMalformed
			return
		}
		// a compressed answer is held to 1 MiB; what it expands to, to 16
		plain, err := io.ReadAll(io.LimitReader(zr, 16*maxUsageBody+1))
		if err != nil || len(plain) > 16*maxUsageBody {
			u.failed = runtime.ReportTooLarge
			return
		}
		body = plain
	}
	if u.stream {
		if u.gzip {
			u.gzip = false
			u.buf = nil
			u.scanLines(body)
			u.scanLines([]byte("\n"))
		} else if len(u.buf) > 0 {
			u.line(u.buf)
		}
		return
	}
	var answer struct {
		Usage map[string]json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		u.failed = runtime.ReportMalformed
		return
	}
	u.usage = answer.Usage
}

// units is usage.<field> once the body has ended, or why it cannot be
// taken (a runtime.Report reason).
func (u *usageReader) units(field string) (int64, string) {
	if u.failed != "" {
		return 0, u.failed
	}
	raw, ok := u.usage[field]
	if !ok || string(raw) == "null" {
		return 0, runtime.ReportMissing
	}
	return parseUnits(string(raw))
}

// parseUnits reads a reported cost: a whole number, not negative.
func parseUnits(s string) (int64, string) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// 12.0 is a whole number written as JSON numbers sometimes are
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, runtime.ReportMalformed
		}
		n = int64(f)
	}
	if n < 0 {
		return 0, runtime.ReportNegative
	}
	return n, ""
}

// hasUsageObject reports whether an event may carry a usage object: a
// "usage" key followed by '{'. Only those events are decoded.
func hasUsageObject(data []byte) bool {
	for {
		i := bytes.Index(data, []byte(`"usage"`))
		if i < 0 {
			return false
		}
		rest := bytes.TrimLeft(data[i+len(`"usage"`):], " \t")
		if r, ok := bytes.CutPrefix(rest, []byte(":")); ok && len(bytes.TrimLeft(r, " \t")) > 0 && bytes.TrimLeft(r, " \t")[0] == '{' {
			return true
		}
		data = data[i+1:]
	}
}
