package proxy

import (
	"encoding/json"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/engine"
)

// usageReader finds the usage object of an OpenAI-compatible answer in
// the bytes copied to the client, without holding them back: the last
// top-level usage of a plain JSON answer, or of the last data event that
// carries one in an event stream (stream_options.include_usage). It reads
// as a streaming parser does, gzip-encoded or not: what it holds is one
// usage object (at most maxUsageObject), one bit a level of nesting, and a
// gzip decoder's window, whatever the answer's size.
type usageReader struct {
	body usageBody
	gz   *gunzip // a gzip-encoded answer, once its first bytes came
	gzip bool
	// failed is the reason no usage can be found, once known.
	failed string
	ended  bool
	found  usageFound
}

// usageBody reads the plain bytes of an answer.
type usageBody interface {
	write(p []byte)
	end() usageFound
}

// usageFound is the last usage object read whole, and why the answer's
// usage cannot be taken ("" when it can).
type usageFound struct {
	usage  map[string]json.RawMessage
	reason string
}

// newUsageReader reads an answer of these Content-Type and
// Content-Encoding values.
func newUsageReader(contentType, encoding []string) *usageReader {
	u := &usageReader{body: &plainScan{}}
	if isEventStream(contentType) {
		u.body = &eventScan{}
	}
	switch enc := strings.ToLower(strings.TrimSpace(strings.Join(encoding, ","))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		u.gzip = true
	default:
		u.failed = engine.ReportEncoding
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
	switch {
	case u.failed != "" || u.ended:
	case u.gzip:
		if u.gz == nil {
			u.gz = startGunzip(u.body)
			// a reader dropped without finish must not leave its decoder waiting
			goruntime.AddCleanup(u, (*gunzip).abandon, u.gz)
		}
		u.gz.write(p)
	default:
		u.body.write(p)
	}
}

// finish reads what is left once the body has ended; units and seen are
// read after it.
func (u *usageReader) finish() {
	if u.failed != "" || u.ended {
		return
	}
	u.ended = true
	var err error
	if u.gz != nil {
		err = u.gz.finish()
	}
	u.found = u.body.end()
	if err != nil || u.gzip && u.gz == nil {
		u.found.reason = engine.ReportMalformed // not gzip, or cut short
	}
}

// units is usage.<field> once the body has ended, or why it cannot be
// taken (a engine.Report reason).
func (u *usageReader) units(field string) (int64, string) {
	if u.failed != "" {
		return 0, u.failed
	}
	if u.found.reason != "" {
		return 0, u.found.reason
	}
	raw, ok := u.found.usage[field]
	if !ok || string(raw) == "null" {
		return 0, engine.ReportMissing
	}
	return parseUnits(string(raw))
}

// seen is usage.<field> of the last usage object read whole, even when
// units cannot take it: an answer cut short after its usage, or one whose
// last usage is too large or broken.
func (u *usageReader) seen(field string) (int64, bool) {
	raw, ok := u.found.usage[field]
	if !ok {
		return 0, false
	}
	n, reason := parseUnits(string(raw))
	return n, reason == ""
}

// parseUnits reads a reported cost: a whole number, not negative.
func parseUnits(s string) (int64, string) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// 12.0 is a whole number written as JSON numbers sometimes are
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, engine.ReportMalformed
		}
		n = int64(f)
	}
	if n < 0 {
		return 0, engine.ReportNegative
	}
	return n, ""
}

// plainScan reads a plain JSON answer.
type plainScan struct{ scan jsonScan }

func (b *plainScan) write(p []byte) { b.scan.write(p) }

func (b *plainScan) end() usageFound {
	b.scan.end()
	return found(&b.scan)
}

// found is what a JSON text's last top-level usage member says.
func found(s *jsonScan) usageFound {
	var f usageFound
	if s.usageObject() && !s.overflow && json.Unmarshal(s.usage, &f.usage) != nil {
		f.usage = nil
	}
	switch {
	case !s.valid():
		f.reason = engine.ReportMalformed
	case !s.hasUsage || s.usageKind == 'n':
		f.reason = engine.ReportMissing // none, or "usage": null
	case s.overflow:
		f.reason = engine.ReportTooLarge
	case s.usageKind != '{':
		f.reason = engine.ReportMalformed
	}
	return f
}
