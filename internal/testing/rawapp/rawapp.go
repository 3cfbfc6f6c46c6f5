// Package rawapp is an application on a raw socket, for tests of what
// the enforcer sends to the application and makes of what it answers,
// byte for byte: it reads requests off the wire as sent and writes
// whatever a test scripts, well formed or not.
package rawapp

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
)

// Request is a request as an application read it off the wire.
type Request struct {
	Req     *http.Request // parsed from Head; its Body is Body
	Head    string        // request line and header fields, as sent
	Body    []byte
	Trailer string // the trailer section of a chunked body, as sent
}

// Serve runs an application on a raw socket until the test ends: answer
// is called for each request read on a connection and writes whatever it
// likes; the connection closes when answer returns false. It returns the
// application's URL.
func Serve(t testing.TB, answer func(conn net.Conn, sent *Request) bool) string {
	t.Helper()
	return serveConns(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for {
			sent, err := Read(br)
			if err != nil || !answer(conn, sent) {
				return
			}
		}
	})
}

// serveConns accepts connections on a loopback port until the test ends,
// serving each with serve on a goroutine of its own, and returns the
// port's URL. The test's end closes the listener and every connection,
// and waits for serve to return.
func serveConns(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() {
				defer conn.Close()
				serve(conn)
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// Read reads one request off br, keeping its bytes.
func Read(br *bufio.Reader) (*Request, error) {
	head, err := readLines(br)
	if err != nil {
		return nil, err
	}
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		return nil, err
	}
	sent := &Request{Req: req, Head: head}
	switch {
	case len(req.TransferEncoding) > 0:
		if sent.Body, err = io.ReadAll(httputil.NewChunkedReader(br)); err != nil {
			return nil, err
		}
		if sent.Trailer, err = readLines(br); err != nil {
			return nil, err
		}
	case req.ContentLength > 0:
		sent.Body = make([]byte, req.ContentLength)
		if _, err := io.ReadFull(br, sent.Body); err != nil {
			return nil, err
		}
	}
	req.Body = io.NopCloser(bytes.NewReader(sent.Body))
	return sent, nil
}

// readLines reads lines up to and including a blank one.
func readLines(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		head.WriteString(line)
		if line == "\r\n" || line == "\n" {
			return head.String(), nil
		}
	}
}
