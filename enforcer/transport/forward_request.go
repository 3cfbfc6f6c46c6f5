package transport

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// writeHead writes the head of r as the request the handler decided on:
// its method, its origin-form target, its Host and its header fields as
// they are (forwarding headers included), with this hop's framing. As the
// reverse proxy does, it leaves out hop-by-hop fields (the handler has
// removed them already; a request built otherwise keeps the rule) except
// "Te: trailers", and Expect, which the enforcer answers itself.
func (f *forwarder) writeHead(bw *bufio.Writer, r *http.Request) error {
	host := r.Host
	if host == "" {
		host = f.host
	}
	_, _ = bw.WriteString(r.Method)
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(r.URL.EscapedPath())
	if r.URL.RawQuery != "" {
		_ = bw.WriteByte('?')
		_, _ = bw.WriteString(r.URL.RawQuery)
	}
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = bw.WriteString(host)
	_, _ = bw.WriteString("\r\n")

	connection := r.Header["Connection"]
	for k, vv := range r.Header {
		// Content-Length is written below from the body's length; the
		// client's own would be a duplicate.
		if request.IsHopByHop(k) || k == "Content-Length" || k == "Expect" || (connection != nil && request.Listed(connection, k)) {
			continue
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
	if te := r.Header["Te"]; te != nil && request.Listed(te, "trailers") {
		writeField(bw, "Te", "trailers")
	}
	switch {
	case r.ContentLength < 0:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
		if len(r.Trailer) > 0 {
			keys := make([]string, 0, len(r.Trailer))
			for k := range r.Trailer {
				keys = append(keys, textproto.CanonicalMIMEHeaderKey(k))
			}
			slices.Sort(keys)
			writeField(bw, "Trailer", strings.Join(keys, ","))
		}
	case r.ContentLength > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch:
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), r.ContentLength, 10))
		_, _ = bw.WriteString("\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// WriteRequest writes r as the forwarder sends it to an application at
// host (the Host of a request that has none): its head, then its body. It
// reports false, writing nothing, for a request the forwarder leaves to
// the reverse proxy (upgrades). Differential tests read these bytes as the
// application would.
func WriteRequest(bw *bufio.Writer, r *http.Request, host string) (taken bool, err error) {
	f := &forwarder{host: host}
	if !f.takes(r) {
		return false, nil
	}
	if err := f.writeHead(bw, r); err != nil {
		return true, err
	}
	if r.ContentLength != 0 {
		if err := writeBody(bw, r.Body, r.ContentLength, r.Trailer, false); err != nil {
			return true, err
		}
	}
	return true, bw.Flush()
}

func writeField(bw *bufio.Writer, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	_, _ = bw.WriteString(v)
	_, _ = bw.WriteString("\r\n")
}

// writeBody copies a request body of length bytes (chunked when negative,
// with trailer after it) to bw, flushing each piece when streamed so that
// the application gets what has arrived. A failure to read the body is a
// *RequestBodyError; others are the application's connection's.
func writeBody(bw *bufio.Writer, body io.Reader, length int64, trailer http.Header, streamed bool) error {
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	chunked := length < 0
	var sent int64
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if !chunked && sent+int64(n) > length {
				return &RequestBodyError{fmt.Errorf("body longer than its Content-Length %d", length)}
			}
			sent += int64(n)
			if chunked {
				_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(n), 16))
				_, _ = bw.WriteString("\r\n")
			}
			_, _ = bw.Write(buf[:n])
			if chunked {
				_, _ = bw.WriteString("\r\n")
			}
			if streamed {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return &RequestBodyError{rerr}
		}
	}
	if !chunked && sent != length {
		return &RequestBodyError{fmt.Errorf("%d of %d bytes: %w", sent, length, io.ErrUnexpectedEOF)}
	}
	if chunked {
		_, _ = bw.WriteString("0\r\n")
		// The server fills the declared trailer in as the body ends; its
		// fields go in order, as http.Transport writes them.
		for _, k := range slices.Sorted(maps.Keys(trailer)) {
			for _, v := range trailer[k] {
				writeField(bw, textproto.CanonicalMIMEHeaderKey(k), v)
			}
		}
		_, _ = bw.WriteString("\r\n")
	}
	return bw.Flush()
}
