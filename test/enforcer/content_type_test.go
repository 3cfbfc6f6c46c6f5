package enforcer

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawApp answers every request with exactly answer, as bytes, and returns
// its base URL.
func rawApp(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestNoContentTypeAdded: an answer without Content-Type reaches the client
// without one, over HTTP/1.1 (read as raw bytes) and h2c, whatever its body
// looks like; one with a Content-Type keeps exactly it.
func TestNoContentTypeAdded(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"no Content-Type, an HTML-looking body", "HTTP/1.1 200 OK\r\nContent-Length: 15\r\nX-Content-Type-Options: nosniff\r\n\r\n<html>hi</html>", ""},
		{"no Content-Type, JSON", "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}", ""},
		{"the application's own", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := start(t, setup{policies: policy("api", `
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: all, limits: [{requests: 100, period: 1m}]}]`), upstream: rawApp(t, tc.answer)})

			c, err := net.Dial("tcp", strings.TrimPrefix(in.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprint(c, "GET /x HTTP/1.1\r\nHost: api\r\nX-Tenant-ID: a\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Values("Content-Type"); strings.Join(got, ",") != tc.want {
				t.Errorf("HTTP/1.1: Content-Type %q, the application sent %q", got, tc.want)
			}

			h2 := h2cClient()
			req, _ := http.NewRequest(http.MethodGet, in.url+"/x", nil)
			req.Header.Set("X-Tenant-ID", "a")
			resp, err = h2.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("answered over %s", resp.Proto)
			}
			if got := resp.Header.Values("Content-Type"); strings.Join(got, ",") != tc.want {
				t.Errorf("h2c: Content-Type %q, the application sent %q", got, tc.want)
			}
		})
	}
}
