package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// conn is one keep-alive HTTP/1.1 client connection. It writes requests
// prepared as bytes and reads responses without allocating, so the load
// generator, which shares the machine's CPUs with the proxy it measures,
// spends a few microseconds per request rather than net/http's tens.
type conn struct {
	addr    string
	timeout time.Duration
	nc      net.Conn
	br      *bufio.Reader
	// used is true once a response came back on nc: a failure before the
	// first byte of the next one is the server closing an idle connection,
	// and the request is sent again on a new connection.
	used bool
}

func newConn(addr string, timeout time.Duration) *conn {
	return &conn{addr: addr, timeout: timeout}
}

// errMalformed is a response this client cannot parse.
var errMalformed = errors.New("malformed HTTP response")

// do sends req and reads the whole response; head says the request was
// HEAD, whose response has no body whatever its headers say.
func (c *conn) do(req []byte, head bool) (int, error) {
	status, started, err := c.roundTrip(req, head)
	if err != nil && !started && c.used {
		c.close()
		status, _, err = c.roundTrip(req, head)
	}
	if err != nil {
		c.close()
	}
	return status, err
}

func (c *conn) roundTrip(req []byte, head bool) (status int, started bool, err error) {
	if c.nc == nil {
		nc, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, false, err
		}
		c.nc, c.used = nc, false
		if c.br == nil {
			c.br = bufio.NewReaderSize(nc, 16<<10)
		} else {
			c.br.Reset(nc)
		}
	}
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, false, err
	}
	if _, err := c.nc.Write(req); err != nil {
		return 0, false, err
	}
	if _, err := c.br.Peek(1); err != nil {
		return 0, false, err
	}
	status, keepAlive, err := readResponse(c.br, head)
	if err != nil {
		return status, true, err
	}
	c.used = true
	if !keepAlive {
		c.close()
	}
	return status, true, nil
}

func (c *conn) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

// readResponse reads one response (skipping interim 1xx ones) and its body,
// and says whether the connection may carry another request.
func readResponse(br *bufio.Reader, head bool) (status int, keepAlive bool, err error) {
	for {
		status, keepAlive, err = readOne(br, head)
		if err != nil || status >= 200 || status == 101 {
			return status, keepAlive, err
		}
	}
}

func readOne(br *bufio.Reader, head bool) (int, bool, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, fmt.Errorf("%w: status line %q", errMalformed, bytes.TrimSpace(line))
	}
	status, ok := parseUint(line[9:12], 10)
	if !ok {
		return 0, false, fmt.Errorf("%w: status line %q", errMalformed, bytes.TrimSpace(line))
	}
	keepAlive := line[7] == '1' // HTTP/1.1 keeps alive unless told otherwise
	contentLength, chunked := -1, false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return status, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, false, fmt.Errorf("%w: header line %q", errMalformed, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := parseUint(value, 10)
			if !ok {
				return status, false, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
			contentLength = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keepAlive = false
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				keepAlive = true
			}
		}
	}
	switch {
	case head || status < 200 || status == 204 || status == 304:
		return status, keepAlive, nil
	case chunked:
		return status, keepAlive, discardChunked(br)
	case contentLength >= 0:
		_, err := br.Discard(contentLength)
		return status, keepAlive, err
	default:
		// No length: the body ends when the server closes the connection.
		_, err := io.Copy(io.Discard, br)
		return status, false, err
	}
}

// discardChunked reads a chunked body and its trailers.
func discardChunked(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, ok := parseUint(bytes.TrimSpace(size), 16)
		if !ok {
			return fmt.Errorf("%w: chunk size %q", errMalformed, line)
		}
		if n == 0 {
			break
		}
		if _, err := br.Discard(n); err != nil {
			return err
		}
		if _, err := br.Discard(2); err != nil { // the chunk's CRLF
			return err
		}
	}
	for { // trailers, up to the empty line
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return nil
		}
	}
}

// parseUint reads a non-empty decimal or hexadecimal number of at most 15
// digits, without the allocations of strconv on a byte slice.
func parseUint(b []byte, base int) (int, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		var d int
		switch {
		case '0' <= c && c <= '9':
			d = int(c - '0')
		case base == 16 && 'a' <= c && c <= 'f':
			d = int(c-'a') + 10
		case base == 16 && 'A' <= c && c <= 'F':
			d = int(c-'A') + 10
		default:
			return 0, false
		}
		n = n*base + d
	}
	return n, true
}
