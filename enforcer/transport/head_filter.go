package transport

import (
	"net/http"
	"strings"
)

// AnswerHead is what a caller of Forward asks of the application's answer
// beyond the answer itself: the fields of its heads meant for the
// enforcer, not the client (a cost the application reports), and the 101
// of an upgrade. The caller's writer sees the final head as it is written
// and takes its fields out itself; the heads the transport writes on its
// own are stripped here: informational answers (103 Early Hints), and the
// 101 of an upgrade, which the reverse proxy writes on the hijacked
// connection.
type AnswerHead struct {
	// Private are the names of the fields to take out.
	Private []string
	// Upgraded is set once the application switched protocols: the 101
	// was the answer's final head; UpgradeFields are the Private fields it
	// carried, taken out of it.
	Upgraded      bool
	UpgradeFields http.Header
}

// privateFields is the writer of a request forwarded with an AnswerHead.
type privateFields struct {
	http.ResponseWriter
	head *AnswerHead
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *privateFields) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the writer below, as the writer it stands for would: the
// copy of a streamed answer flushes what it finds a Flusher.
func (w *privateFields) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// take removes the private fields from h, a head of status code about to
// go to the client that the transport writes itself; a 101 is the final
// head, whose private fields are kept for the caller and whose Trailer
// field no longer announces them.
func (w *privateFields) take(code int, h http.Header) {
	head := w.head
	if code != http.StatusSwitchingProtocols || head.Upgraded {
		for _, name := range head.Private {
			delete(h, name)
		}
		return
	}
	head.Upgraded = true
	head.UpgradeFields = make(http.Header, len(head.Private))
	for _, name := range head.Private {
		if v, ok := h[name]; ok {
			head.UpgradeFields[name] = v
			delete(h, name)
		}
		UnannounceTrailer(h, name)
	}
}

// UnannounceTrailer removes name from hdr's Trailer field, so that the
// client is not told of a trailer it will not get.
func UnannounceTrailer(hdr http.Header, name string) {
	vv, ok := hdr["Trailer"]
	if !ok {
		return
	}
	var kept []string
	for _, v := range vv {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" && !strings.EqualFold(n, name) {
				kept = append(kept, n)
			}
		}
	}
	if len(kept) == 0 {
		delete(hdr, "Trailer")
		return
	}
	hdr["Trailer"] = []string{strings.Join(kept, ", ")}
}

// privateOf is the privateFields w is or wraps, nil when there is none.
func privateOf(w http.ResponseWriter) *privateFields {
	for {
		if f, ok := w.(*privateFields); ok {
			return f
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// filterHead takes the private fields out of h, the fields of a head of
// status code that the transport writes to w itself.
func filterHead(w http.ResponseWriter, code int, h http.Header) {
	if f := privateOf(w); f != nil {
		f.take(code, h)
	}
}

// upgradeFilterKey holds, in an upgrade's context, the privateFields of
// its writer: the reverse proxy shows the 101 to ModifyResponse alone.
type upgradeFilterKey struct{}
