package transport

import (
	"io"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// copyResponse writes resp to w, streaming its body, and reports whether
// its connection can carry another request, or broke off the body.
func copyResponse(w http.ResponseWriter, resp *http.Response) (reusable, broken bool) {
	hdr := w.Header()
	copyEndToEnd(hdr, resp.Header)
	suppressSniffing(hdr, resp.Header)
	announced := len(resp.Trailer)
	if announced > 0 {
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		hdr["Trailer"] = []string{strings.Join(names, ", ")}
	}
	w.WriteHeader(resp.StatusCode)

	// Like the reverse proxy, flush each read of a body of unknown length
	// or an event stream, so that streamed responses are not held back.
	var flusher http.Flusher
	if resp.ContentLength < 0 || isEventStream(resp.Header["Content-Type"]) {
		flusher, _ = w.(http.Flusher)
		if flusher != nil {
			flusher.Flush()
		}
	}
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return false, false // the client went away
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return false, true
		}
	}
	// Trailers the application sent without announcing them go out with
	// the prefix the server takes for undeclared trailers.
	prefix := ""
	if len(resp.Trailer) != announced {
		prefix = http.TrailerPrefix
	}
	for k, vv := range resp.Trailer {
		hdr[prefix+k] = vv
	}
	_ = resp.Body.Close()
	return !resp.Close, false
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(ct []string) bool {
	if len(ct) == 0 {
		return false
	}
	v := ct[0]
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return strings.EqualFold(strings.TrimSpace(v), "text/event-stream")
}

// writeInformational relays a 1xx answer with the application's fields
// only, but the private fields of its AnswerHead. The server sends the whole header
// map with a 1xx, and the map holds the rate limit headers, which belong
// to the final response: they are set aside while it is written.
func writeInformational(w http.ResponseWriter, code int, fields http.Header) {
	h := w.Header()
	own := make(http.Header, len(h))
	for k, vv := range h {
		own[k] = vv
	}
	clear(h)
	copyEndToEnd(h, fields)
	filterHead(w, code, h)
	w.WriteHeader(code)
	clear(h)
	for k, vv := range own {
		h[k] = vv
	}
}

// copyEndToEnd adds to dst the fields of src that are not about one
// connection only.
// suppressSniffing keeps net/http from adding a Content-Type the
// application did not send (it would guess one from the body: a JSON
// answer could become text/html to a browser).
func suppressSniffing(dst, src http.Header) {
	if _, ok := src["Content-Type"]; !ok {
		dst["Content-Type"] = nil
	}
}

func copyEndToEnd(dst, src http.Header) {
	connection := src["Connection"]
	for k, vv := range src {
		if request.IsHopByHop(k) || (connection != nil && request.Listed(connection, k)) {
			continue
		}
		if have, ok := dst[k]; ok {
			dst[k] = append(have, vv...)
		} else {
			dst[k] = vv
		}
	}
}
