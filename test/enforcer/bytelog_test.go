package enforcer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// byteApp is an application that records every request it receives, byte
// for byte, and parses it with a strict parser of its own, so that a test
// sees exactly what the enforcer forwarded rather than what a lenient
// library made of it. It answers each request 200 with an empty body and
// X-App-Seq (the request's number, from 1) and keeps the connection alive.
//
// A request carrying "Upgrade: h2c" is answered 101 and the connection then
// carries further HTTP/1.1 requests straight to the application, as an h2c
// server's connection would carry HTTP/2 streams: the stand-in for an
// application that speaks cleartext HTTP/2.
type byteApp struct {
	url string
	ln  net.Listener

	mu   sync.Mutex
	reqs []*appRequest
}

// field is one header field as it was on the wire, name unchanged.
type field struct{ name, value string }

// appRequest is one request the application received.
type appRequest struct {
	seq    int
	raw    []byte // the request's bytes as read, body included
	method string
	target string
	proto  string
	fields []field
	body   []byte
	// trailers are the fields of a chunked body's trailer section.
	trailers []field
	// tunnelled says the request came over an upgraded (h2c) connection,
	// where the enforcer no longer parses requests.
	tunnelled bool
	// err is why the strict parser refused the bytes; the other fields
	// hold what it had read.
	err error
}

// values are the values of every field whose name, with '_' for '-', is
// name, case-insensitively: how CGI and FastCGI (HTTP_X_TENANT_ID) and
// case-insensitive header maps see them.
func (r *appRequest) values(name string) []string {
	var vv []string
	for _, f := range r.fields {
		if cgiName(f.name) == cgiName(name) {
			vv = append(vv, f.value)
		}
	}
	return vv
}

func cgiName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "_", "-"))
}

func newByteApp(t testing.TB) *byteApp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &byteApp{url: "http://" + ln.Addr().String(), ln: ln}
	var wg sync.WaitGroup
	conns := make(map[net.Conn]struct{})
	var connsMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns[c] = struct{}{}
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.serve(c)
				connsMu.Lock()
				delete(conns, c)
				connsMu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		connsMu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	return a
}

// requests are the requests received so far.
func (a *byteApp) requests() []*appRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*appRequest(nil), a.reqs...)
}

func (a *byteApp) record(r *appRequest) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, r)
	r.seq = len(a.reqs)
	return r.seq
}

// maxAppHead bounds one request head, above any head the enforcer accepts.
const maxAppHead = 4 << 20

func (a *byteApp) serve(c net.Conn) {
	defer c.Close()
	rec := &recordingReader{r: c}
	br := bufio.NewReaderSize(rec, 64<<10)
	tunnelled := false
	for {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := br.Peek(1); err != nil {
			return
		}
		rec.start(br.Buffered())
		r := parseAppRequest(br)
		r.raw = rec.take(br.Buffered())
		r.tunnelled = tunnelled
		seq := a.record(r)
		if r.err != nil {
			fmt.Fprintf(c, "HTTP/1.1 400 Bad Request\r\nX-App-Seq: %d\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", seq)
			return
		}
		if !tunnelled && headerHas(r, "Upgrade", "h2c") {
			fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nX-App-Seq: %d\r\n\r\n", seq)
			tunnelled = true
			continue
		}
		closing := headerHas(r, "Connection", "close") || (r.proto == "HTTP/1.0" && !headerHas(r, "Connection", "keep-alive"))
		conn := ""
		if closing {
			conn = "Connection: close\r\n"
		}
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-App-Seq: %d\r\n%sContent-Length: 0\r\n\r\n", seq, conn); err != nil || closing {
			return
		}
	}
}

// headerHas reports whether a field named name lists token.
func headerHas(r *appRequest, name, token string) bool {
	for _, v := range r.values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// recordingReader keeps what was read from the connection so that each
// request's raw bytes can be cut out of it.
type recordingReader struct {
	r   io.Reader
	buf bytes.Buffer
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	rr.buf.Write(p[:n])
	return n, err
}

// start drops what came before the request that begins with the last
// buffered bytes.
func (rr *recordingReader) start(buffered int) {
	rr.buf.Next(rr.buf.Len() - buffered)
}

// take is the request just parsed: what was read, less what is still
// buffered for the next one.
func (rr *recordingReader) take(buffered int) []byte {
	b := rr.buf.Bytes()
	return append([]byte(nil), b[:len(b)-buffered]...)
}

var (
	requestLine = regexp.MustCompile(`^([!#$%&'*+\-.^_` + "`" + `|~0-9A-Za-z]+) ([\x21-\x7e]+) (HTTP/1\.[01])$`)
	fieldName   = regexp.MustCompile(`^[!#$%&'*+\-.^_` + "`" + `|~0-9A-Za-z]+$`)
	chunkLine   = regexp.MustCompile(`^([0-9A-Fa-f]{1,15})(;.*)?$`)
)

// parseAppRequest reads one request as a strict HTTP/1.1 server would
// (RFC 9112): CRLF line endings, no obs-fold, no whitespace before a
// field's colon, no control characters in values, a target of visible
// ASCII, one framing header.
func parseAppRequest(br *bufio.Reader) *appRequest {
	r := &appRequest{}
	budget := maxAppHead
	line, err := readCRLF(br, &budget)
	if err != nil {
		r.err = fmt.Errorf("request line: %w", err)
		return r
	}
	m := requestLine.FindStringSubmatch(line)
	if m == nil {
		r.err = fmt.Errorf("malformed request line %q", line)
		return r
	}
	r.method, r.target, r.proto = m[1], m[2], m[3]
	if r.fields, err = readFields(br, &budget); err != nil {
		r.err = err
		return r
	}
	te, cl := r.values("Transfer-Encoding"), r.values("Content-Length")
	switch {
	case len(te) > 0 && len(cl) > 0:
		r.err = errors.New("both Transfer-Encoding and Content-Length")
	case len(te) > 1 || (len(te) == 1 && !strings.EqualFold(te[0], "chunked")):
		r.err = fmt.Errorf("Transfer-Encoding %q: only one chunked coding is accepted", te)
	case len(te) == 1:
		r.body, r.trailers, r.err = readChunked(br, &budget)
	case len(cl) > 1:
		r.err = fmt.Errorf("Content-Length sent %d times", len(cl))
	case len(cl) == 1:
		n, err := strconv.ParseUint(cl[0], 10, 31)
		if err != nil || cl[0][0] == '+' {
			r.err = fmt.Errorf("Content-Length %q", cl[0])
			break
		}
		r.body = make([]byte, n)
		if _, err := io.ReadFull(br, r.body); err != nil {
			r.err = fmt.Errorf("body: %w", err)
		}
	}
	return r
}

var errNotCRLF = errors.New("line not ended by CRLF")

func readCRLF(br *bufio.Reader, budget *int) (string, error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice('\n')
		b = append(b, chunk...)
		*budget -= len(chunk)
		if *budget < 0 {
			return "", errors.New("head too large")
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return "", fmt.Errorf("%w: %q", errNotCRLF, b)
	}
	line := b[:len(b)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return "", fmt.Errorf("bare CR in %q", line)
	}
	return string(line), nil
}

func readFields(br *bufio.Reader, budget *int) ([]field, error) {
	var fields []field
	for {
		line, err := readCRLF(br, budget)
		if err != nil {
			return fields, fmt.Errorf("field line: %w", err)
		}
		if line == "" {
			return fields, nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			return fields, fmt.Errorf("obs-fold line %q", line)
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !fieldName.MatchString(name) {
			return fields, fmt.Errorf("malformed field line %q", line)
		}
		value = strings.Trim(value, " \t")
		for i := 0; i < len(value); i++ {
			if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				return fields, fmt.Errorf("control character %#x in field %s", c, name)
			}
		}
		fields = append(fields, field{name, value})
	}
}

func readChunked(br *bufio.Reader, budget *int) (body []byte, trailers []field, err error) {
	for {
		line, err := readCRLF(br, budget)
		if err != nil {
			return body, nil, fmt.Errorf("chunk size line: %w", err)
		}
		m := chunkLine.FindStringSubmatch(line)
		if m == nil {
			return body, nil, fmt.Errorf("malformed chunk size line %q", line)
		}
		n, _ := strconv.ParseInt(m[1], 16, 64)
		if n == 0 {
			trailers, err = readFields(br, budget)
			return body, trailers, err
		}
		if n > 16<<20 {
			return body, nil, fmt.Errorf("chunk of %d bytes", n)
		}
		chunk := make([]byte, n+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			return body, nil, fmt.Errorf("chunk: %w", err)
		}
		if !bytes.HasSuffix(chunk, []byte("\r\n")) {
			return body, nil, errors.New("chunk not ended by CRLF")
		}
		body = append(body, chunk[:n]...)
	}
}
