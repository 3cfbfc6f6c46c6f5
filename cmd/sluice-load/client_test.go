package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestReadResponse(t *testing.T) {
	cases := []struct {
		name          string
		response      string
		head          bool
		wantStatus    int
		wantKeepAlive bool
		wantErr       string
	}{
		{name: "content length", response: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", wantStatus: 200, wantKeepAlive: true},
		{name: "chunked with extension and trailer",
			response:   "HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: 1\r\n\r\n",
			wantStatus: 429, wantKeepAlive: true},
		{name: "connection close", response: "HTTP/1.1 503 Service Unavailable\r\nconnection: Close\r\ncontent-length: 0\r\n\r\n", wantStatus: 503},
		{name: "HTTP/1.0 keep-alive", response: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi", wantStatus: 200, wantKeepAlive: true},
		{name: "HTTP/1.0 closes", response: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", wantStatus: 200},
		{name: "body until close", response: "HTTP/1.1 200 OK\r\n\r\nuntil the end", wantStatus: 200},
		{name: "no body for 204", response: "HTTP/1.1 204 No Content\r\n\r\n", wantStatus: 204, wantKeepAlive: true},
		{name: "no body for HEAD", response: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", head: true, wantStatus: 200, wantKeepAlive: true},
		{name: "interim 100 skipped", response: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", wantStatus: 201, wantKeepAlive: true},
		{name: "not HTTP", response: "SSH-2.0-OpenSSH\r\n", wantErr: "malformed HTTP response: status line"},
		{name: "bad length", response: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: "Content-Length"},
		{name: "bad chunk", response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: "chunk size"},
		{name: "truncated body", response: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", wantErr: "EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// A second response follows, to show exactly one was consumed.
			br := bufio.NewReader(strings.NewReader(tc.response + "HTTP/1.1 299 Next\r\nContent-Length: 0\r\n\r\n"))
			if tc.wantErr != "" || !tc.wantKeepAlive {
				br = bufio.NewReader(strings.NewReader(tc.response))
			}
			status, keepAlive, err := readResponse(br, tc.head)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(tc.wantStatus))
			g.Expect(keepAlive).To(Equal(tc.wantKeepAlive))
			if keepAlive {
				next, _, err := readResponse(br, false)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(next).To(Equal(299))
			}
		})
	}
}

func TestConnKeepsOneConnectionAlive(t *testing.T) {
	g := NewWithT(t)
	var conns atomic.Int64
	var lastHost, lastURI, lastTenant atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastHost.Store(r.Host)
		lastURI.Store(r.RequestURI)
		lastTenant.Store(r.Header.Get("X-Tenant-ID"))
		w.Write([]byte(strings.Repeat("x", 10000))) // chunked: larger than net/http's buffer
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tg := mustTarget(t, srv.URL+"/a?b=c", []string{"X-Tenant-ID: t{tenant}"}, 1)
	c := newConn(tg.addr, time.Second)
	defer c.close()
	for range 100 {
		status, err := c.do(tg.request(0), false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(200))
	}
	g.Expect(conns.Load()).To(Equal(int64(1)))
	g.Expect(lastHost.Load()).To(Equal(strings.TrimPrefix(srv.URL, "http://")))
	g.Expect(lastURI.Load()).To(Equal("/a?b=c"))
	g.Expect(lastTenant.Load()).To(Equal("t0"))
}

func TestConnResendsWhenTheServerClosedAnIdleConnection(t *testing.T) {
	g := NewWithT(t)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tg := mustTarget(t, srv.URL, nil, 1)
	c := newConn(tg.addr, time.Second)
	defer c.close()
	_, err := c.do(tg.request(0), false)
	g.Expect(err).NotTo(HaveOccurred())
	srv.CloseClientConnections()
	status, err := c.do(tg.request(0), false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(200))
	g.Expect(conns.Load()).To(Equal(int64(2)))
}

func TestConnTimesOut(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	go func() { // accept and never answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	tg := mustTarget(t, "http://"+ln.Addr().String()+"/", nil, 1)
	c := newConn(tg.addr, 100*time.Millisecond)
	begin := time.Now()
	_, err = c.do(tg.request(0), false)
	g.Expect(err).To(MatchError(ContainSubstring("timeout")))
	g.Expect(time.Since(begin)).To(BeNumerically("<", time.Second))
}

func TestTargetIsLoopbackOnly(t *testing.T) {
	cases := []struct {
		url     string
		wantErr string
	}{
		{url: "http://127.0.0.1:9080/"},
		{url: "http://127.0.0.2:9080/"},
		{url: "http://[::1]:9080/"},
		{url: "http://localhost:9080/"},
		{url: "http://10.0.0.1:9080/", wantErr: "only sends load to loopback addresses"},
		{url: "http://192.0.2.1/", wantErr: "only sends load to loopback addresses"},
		{url: "https://127.0.0.1/", wantErr: "plain HTTP/1.1"},
		{url: "localhost:9080", wantErr: "want http://"},
		{url: "127.0.0.1:9080", wantErr: "target URL"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			_, err := newTarget(context.Background(), tc.url, "GET", nil, 1)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			}
		})
	}
}

func TestRequestsRotateTenants(t *testing.T) {
	g := NewWithT(t)
	tg, err := newTarget(context.Background(), "http://127.0.0.1:9080/v1/items?page=2", "POST",
		[]string{"X-Tenant-ID: tenant-{tenant}", "X-Plan:free"}, 3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tg.addr).To(Equal("127.0.0.1:9080"))
	g.Expect(string(tg.request(0))).To(Equal("POST /v1/items?page=2 HTTP/1.1\r\nHost: 127.0.0.1:9080\r\nUser-Agent: sluice-load\r\n" +
		"X-Tenant-ID: tenant-0\r\nX-Plan: free\r\nContent-Length: 0\r\n\r\n"))
	g.Expect(string(tg.request(4))).To(ContainSubstring("X-Tenant-ID: tenant-1\r\n"))
	g.Expect(string(tg.request(5))).To(ContainSubstring("X-Tenant-ID: tenant-2\r\n"))

	for _, bad := range []string{"NoColon", ": empty name", "X-Bad\r\nInjected: 1", "Host: other"} {
		_, err := newTarget(context.Background(), "http://127.0.0.1:9080/", "GET", []string{bad}, 1)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}
