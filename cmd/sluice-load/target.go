package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// tenantPlaceholder in a header value is replaced by the tenant number,
// 0..tenants-1, rotating request by request.
const tenantPlaceholder = "{tenant}"

// target is where the load goes and the requests it sends: one prepared
// request per tenant, sent in turn.
type target struct {
	url      string
	addr     string // a loopback IP address and port, resolved once
	head     bool
	requests [][]byte
}

// httpCaller sends t's requests on one keep-alive connection.
type httpCaller struct {
	c *conn
	t *target
}

func (h *httpCaller) call(i uint64) (int, error) { return h.c.do(h.t.request(i), h.t.head) }
func (h *httpCaller) close()                     { h.c.close() }

// request is the i-th request to send.
func (t *target) request(i uint64) []byte {
	return t.requests[i%uint64(len(t.requests))]
}

// newTarget checks rawURL and prepares the requests. Load only goes to the
// loopback interface: this tool measures a proxy running next to it, and
// refuses to be pointed at another machine.
func newTarget(ctx context.Context, rawURL, method string, headers []string, tenants int) (*target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("target URL: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("target URL %q: want http://HOST:PORT/PATH (plain HTTP/1.1)", rawURL)
	}
	if tenants < 1 {
		return nil, fmt.Errorf("--tenants must be at least 1, got %d", tenants)
	}
	if method == "" || strings.ContainsAny(method, " \r\n") {
		return nil, fmt.Errorf("--method %q is not an HTTP method", method)
	}
	addr, err := loopbackAddr(ctx, u)
	if err != nil {
		return nil, err
	}
	t := &target{url: u.String(), addr: addr, head: method == "HEAD"}
	for n := range tenants {
		req, err := buildRequest(u, method, headers, strconv.Itoa(n))
		if err != nil {
			return nil, err
		}
		t.requests = append(t.requests, req)
	}
	return t, nil
}

// loopbackAddr resolves u's host and port to one loopback address.
func loopbackAddr(ctx context.Context, u *url.URL) (string, error) {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", fmt.Errorf("target host %q: %w", host, err)
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("target host %q has no address", host)
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return "", fmt.Errorf("target host %q is %s: sluice-load only sends load to loopback addresses (127.0.0.0/8, ::1)", host, ip.IP)
		}
	}
	return net.JoinHostPort(ips[0].IP.String(), port), nil
}

// buildRequest is the bytes of one request, headers "Name: value" with the
// tenant placeholder replaced by tenant.
func buildRequest(u *url.URL, method string, headers []string, tenant string) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-load\r\n", method, u.RequestURI(), u.Host)
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
			return nil, fmt.Errorf("header %q: want \"Name: value\"", h)
		}
		if strings.EqualFold(name, "Host") || strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Transfer-Encoding") {
			return nil, errors.New("headers Host, Content-Length and Transfer-Encoding are set by sluice-load")
		}
		fmt.Fprintf(&b, "%s: %s\r\n", name, strings.ReplaceAll(value, tenantPlaceholder, tenant))
	}
	switch method {
	case "POST", "PUT", "PATCH":
		b.WriteString("Content-Length: 0\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String()), nil
}
