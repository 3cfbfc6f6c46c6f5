package enforcer

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluice-dev/sluice/internal/testing/rawapp"
)

// h2Call is a request stream a hostile client writes frame by frame.
type h2Call struct {
	name   string
	fields [][2]string // the header block, in order, names as written
	// body is sent in one DATA frame after the header block
	body []byte
	// trailers, when set, end the stream after the body
	trailers [][2]string
	// reset: the client resets the stream after the body instead of
	// ending it; open: it neither ends nor resets it, and closes the
	// connection. Either once the application has the stream open.
	reset, open bool
	// forbidden: HTTP/2 (RFC 9113 8.2) makes the request malformed; it
	// must be refused and reach no application
	forbidden bool
}

// h2Answer is what the client read on its stream.
type h2Answer struct {
	status     string // :status of the first header block
	grpcStatus string // grpc-status, from headers or trailers
	reset      string // the error code of a RST_STREAM or GOAWAY
	headers    []hpack.HeaderField
}

func (a h2Answer) String() string {
	return fmt.Sprintf("status %q grpc-status %q reset %q", a.status, a.grpcStatus, a.reset)
}

// refused: the enforcer did not let the call succeed.
func (a h2Answer) refused() bool {
	return a.reset != "" || a.status != "200" || a.grpcStatus != "0"
}

const (
	createMethod = "/orders.Orders/Create"
	// grpcEmpty is one empty gRPC message
	grpcEmpty = "\x00\x00\x00\x00\x00"
)

// grpcFields are the fields of a well-formed unary call of path by tenant.
func grpcFields(path, tenant string) [][2]string {
	return [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "orders.example"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"x-tenant-id", tenant}}
}

// with is fields with extra ones after them.
func with(fields [][2]string, extra ...[2]string) [][2]string {
	return append(fields[:len(fields):len(fields)], extra...)
}

// replaced is fields with the field named name replaced by the given ones
// (none: removed), in its place.
func replaced(fields [][2]string, name string, by ...[2]string) [][2]string {
	var out [][2]string
	for _, f := range fields {
		if f[0] == name {
			out = append(out, by...)
			by = nil
			continue
		}
		out = append(out, f)
	}
	return out
}

// sendH2 writes c on a new prior-knowledge connection to addr and reads
// the answer on its stream until it ends, is reset, or the connection
// goes (a reset or open call: until the enforcer has read the reset, a
// PING's answer). A reset or open call waits for app to have a stream
// open first, when app is given.
func sendH2(t *testing.T, addr string, c h2Call, app *rawapp.H2CApp) h2Answer {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	fr.MaxHeaderListSize = 16 << 20
	_, _ = io.WriteString(nc, http2.ClientPreface)
	_ = fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range c.fields {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// frames of at most 16 KiB, the size every peer takes
	const frame = 16 << 10
	b := block.Bytes()
	first := b[:min(len(b), frame)]
	b = b[len(first):]
	endStream := len(c.body) == 0 && c.trailers == nil && !c.reset && !c.open
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: endStream, EndHeaders: len(b) == 0}); err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		n := min(len(b), frame)
		if err := fr.WriteContinuation(1, n == len(b), b[:n]); err != nil {
			return h2Answer{reset: "write: " + err.Error()}
		}
		b = b[n:]
	}
	if len(c.body) > 0 {
		_ = fr.WriteData(1, c.trailers == nil && !c.reset && !c.open, c.body)
	}
	if c.trailers != nil {
		block.Reset()
		for _, f := range c.trailers {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	}
	if c.reset || c.open {
		for deadline := time.Now().Add(10 * time.Second); app != nil && app.Open() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if c.reset {
			_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
		}
		_ = fr.WritePing(false, [8]byte{1})
	}
	var a h2Answer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if a.reset == "" && a.status == "" {
				a.reset = "connection: " + err.Error()
			}
			return a
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if f.IsAck() {
				return a
			}
		case *http2.MetaHeadersFrame:
			a.headers = append(a.headers, f.Fields...)
			if s := f.PseudoValue("status"); s != "" && a.status == "" {
				a.status = s
			}
			for _, h := range f.RegularFields() {
				if h.Name == "grpc-status" {
					a.grpcStatus = h.Value
				}
			}
			if f.StreamEnded() {
				return a
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return a
			}
		case *http2.RSTStreamFrame:
			a.reset = "RST_STREAM " + f.ErrCode.String()
			return a
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeNo || f.LastStreamID < 1 {
				a.reset = "GOAWAY " + f.ErrCode.String()
				return a
			}
		}
	}
}

// servesCreate reports whether a gRPC server routes path to Create: grpc-go
// takes :path as it comes (the service and method either side of its last
// slash), a server on net/http (grpc-go's ServeHTTP, connect-go) the
// decoded path without the query.
func servesCreate(path string) bool {
	route := func(p string) bool {
		sm := strings.TrimPrefix(p, "/")
		i := strings.LastIndex(sm, "/")
		return i >= 0 && sm[:i] == "orders.Orders" && sm[i+1:] == "Create"
	}
	if route(path) {
		return true
	}
	u, err := url.ParseRequestURI(path)
	return err == nil && route(u.Path)
}

// TestGRPCDirectHostileFrames sends gRPC calls on the direct path to an
// H2C application the way a hostile client would write them, frame by
// frame: duplicated or odd pseudo-fields, content types and tenants,
// fields HTTP/2 forbids, paths a router could read as another method,
// header blocks past the limits, streams reset or ended early. Each is
// refused (a reset, an HTTP error or a gRPC error status, and nothing
// reaches the application), or the application receives one call, well
// formed, and the limiter counted it against the tenant and method the
// application serves: a well-formed call of that tenant to Create is
// refused next (its limit is 1).
func TestGRPCDirectHostileFrames(t *testing.T) {
	app := rawapp.ServeH2C(t)
	rule := tenantRule("create", `[{"exact": "`+createMethod+`"}]`, 1)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s", rule), upstream: app.URL})
	addr := strings.TrimPrefix(e.url, "http://")

	body := []byte(grpcEmpty)
	pad := strings.Repeat("a", 1<<20)
	calls := []h2Call{
		{name: "well formed", body: body},
		{name: "no message", body: nil},
		{name: "duplicated :path", forbidden: true, body: body,
			fields: replaced(grpcFields(createMethod, "T"), ":path", [2]string{":path", "/orders.Orders/Get"}, [2]string{":path", createMethod})},
		{name: "upper-case :PATH", forbidden: true, body: body,
			fields: replaced(grpcFields("", "T"), ":path", [2]string{":PATH", createMethod})},
		{name: "unknown pseudo-field", forbidden: true, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{":tenant", "x"})},
		{name: "pseudo-field after a regular one", forbidden: true, body: body,
			fields: with(replaced(grpcFields(createMethod, "T"), ":path"), [2]string{":path", createMethod})},
		{name: ":path without a slash", body: body, fields: replaced(grpcFields("", "T"), ":path", [2]string{":path", "orders.Orders/Create"})},
		{name: "empty :path", forbidden: true, body: body, fields: replaced(grpcFields("", "T"), ":path", [2]string{":path", ""})},
		{name: "content-type twice", body: body, fields: replaced(grpcFields(createMethod, "T"), "content-type",
			[2]string{"content-type", "application/json"}, [2]string{"content-type", "application/grpc"})},
		{name: "content-type twice, gRPC first", body: body, fields: replaced(grpcFields(createMethod, "T"), "content-type",
			[2]string{"content-type", "application/grpc"}, [2]string{"content-type", "application/json"})},
		{name: "upper-case Content-Type", forbidden: true, body: body,
			fields: replaced(grpcFields(createMethod, "T"), "content-type", [2]string{"Content-Type", "application/grpc"})},
		{name: "content-type in capitals", body: body,
			fields: replaced(grpcFields(createMethod, "T"), "content-type", [2]string{"content-type", "APPLICATION/GRPC"})},
		{name: "content-type with a codec and parameters", body: body,
			fields: replaced(grpcFields(createMethod, "T"), "content-type", [2]string{"content-type", "application/grpc+proto; charset=utf-8"})},
		{name: "te gzip", forbidden: true, body: body, fields: replaced(grpcFields(createMethod, "T"), "te", [2]string{"te", "gzip"})},
		{name: "te trailers and gzip", forbidden: true, body: body,
			fields: replaced(grpcFields(createMethod, "T"), "te", [2]string{"te", "trailers, gzip"})},
		{name: "te twice", forbidden: true, body: body,
			fields: with(grpcFields(createMethod, "T"), [2]string{"te", "gzip"})},
		{name: "connection", forbidden: true, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"connection", "x-tenant-id"})},
		{name: "keep-alive", forbidden: true, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"keep-alive", "timeout=5"})},
		{name: "proxy-connection", forbidden: true, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"proxy-connection", "keep-alive"})},
		{name: "transfer-encoding", forbidden: true, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"transfer-encoding", "chunked"})},
		{name: "upgrade", forbidden: true, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"upgrade", "h2c"})},
		{name: "tenant twice", body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"x-tenant-id", "O"})},
		{name: "tenant twice, empty first", body: body,
			fields: replaced(grpcFields(createMethod, "T"), "x-tenant-id", [2]string{"x-tenant-id", ""}, [2]string{"x-tenant-id", "T"})},
		{name: "tenant in two cases", forbidden: true, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"X-Tenant-ID", "O"})},
		{name: "tenant with spaces", body: body,
			fields: replaced(grpcFields(createMethod, "T"), "x-tenant-id", [2]string{"x-tenant-id", " T "})},
		{name: "host beside :authority", body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"host", "other.example"})},
		{name: "client forwarding fields", body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"x-forwarded-for", "198.51.100.7"},
			[2]string{"x-forwarded-host", "internal.example"}, [2]string{"x-forwarded-proto", "https"}, [2]string{"forwarded", "for=198.51.100.7"},
			[2]string{"x-real-ip", "10.0.0.1"})},
		{name: "GET", body: body, fields: replaced(grpcFields(createMethod, "T"), ":method", [2]string{":method", "GET"})},
		{name: "oversized field", body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"x-pad", pad})},
		{name: "oversized block of small fields", body: body, fields: with(grpcFields(createMethod, "T"), manyFields(20000)...)},
		{name: "reset after the message", body: body, reset: true},
		{name: "reset after half a message", body: body[:2], reset: true},
		{name: "left open, then the connection closed", body: body[:2], open: true},
		// trailers: HTTP/2 forbids pseudo-fields and connection-specific
		// fields there, HTTP those that frame, route or modify the request
		{name: "trailers", body: body, trailers: [][2]string{{"x-tenant-id", "O"}, {"x-trailer", "v"}}},
		{name: "declared trailers", body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"trailer", "x-trailer, x-tenant-id"}),
			trailers: [][2]string{{"x-tenant-id", "O"}, {"x-trailer", "v"}}},
		{name: "trailer with a pseudo-field", forbidden: true, body: body, trailers: [][2]string{{":path", "/orders.Orders/Get"}}},
		{name: "upper-case trailer", forbidden: true, body: body, trailers: [][2]string{{"X-Trailer", "v"}}},
	}
	for _, name := range []string{"connection", "te", "content-type", "content-length", "host", "transfer-encoding"} {
		value := map[string]string{"connection": "close", "te": "trailers", "content-type": "application/json", "content-length": "5",
			"host": "other.example", "transfer-encoding": "chunked"}[name]
		calls = append(calls,
			h2Call{name: "trailer " + name, body: body, trailers: [][2]string{{name, value}}},
			h2Call{name: "declared trailer " + name, body: body, fields: with(grpcFields(createMethod, "T"), [2]string{"trailer", name}),
				trailers: [][2]string{{name, value}}})
	}
	calls = append(calls, []h2Call{
		{name: "ended before its content-length", body: body,
			fields: with(grpcFields(createMethod, "T"), [2]string{"content-length", "100"})},
		{name: "content-length past the end", body: []byte(grpcEmpty + grpcEmpty),
			fields: with(grpcFields(createMethod, "T"), [2]string{"content-length", "5"})},
	}...)
	for _, p := range []string{
		"/orders.Orders/%43reate", "/orders.Orders%2FCreate", "/orders.Orders/Get/../Create", "/orders.Orders/./Create",
		"//orders.Orders/Create", "/orders.Orders//Create", "/orders.Orders/Create/", "/orders.Orders/Create?x=1",
		"/orders.Orders/Create#f", "/orders.Orders/Create%00", "/orders.Orders/create", "/./orders.Orders/Create",
		"/orders.Orders/Create;x", "/orders.Orders/Create%2F", "/ORDERS.Orders/Create", "/orders.Orders/Create ",
		"/orders.Orders/Cre%61te", "/orders.Orders/Get%2F..%2FCreate",
	} {
		calls = append(calls, h2Call{name: "path " + p, body: body, fields: replaced(grpcFields("", "T"), ":path", [2]string{":path", p})})
	}

	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			// the test's own tenant (T), and another (O)
			tenant := fmt.Sprintf("t%d", i)
			if c.fields == nil {
				c.fields = grpcFields(createMethod, "T")
			}
			fields := make([][2]string, len(c.fields))
			for j, f := range c.fields {
				if strings.EqualFold(f[0], "x-tenant-id") {
					f[1] = strings.NewReplacer("T", tenant, "O", tenant+"-other").Replace(f[1])
				}
				fields[j] = f
			}
			c.fields = fields
			for j, f := range c.trailers {
				if f[1] == "O" {
					c.trailers[j][1] = tenant + "-other"
				}
			}
			answer := sendH2(t, addr, c, app)
			// a fence: a call the application always serves, after which
			// every stream of the call above has reached it or never will
			fence := sendH2(t, addr, h2Call{fields: grpcFields("/orders.Orders/Fence", "fence"), body: body}, nil)
			g.Expect(fence.refused()).To(BeFalse(), "the fence call: %v", fence)
			g.Eventually(app.Open).WithTimeout(10*time.Second).Should(BeZero(), "no stream to the application is left open")
			var got []*rawapp.Call
			for drained := false; !drained; {
				select {
				case call := <-app.Calls:
					if call.Path() != "/orders.Orders/Fence" {
						got = append(got, call)
					}
				default:
					drained = true
				}
			}
			t.Logf("answer: %v; the application read %d call(s)", answer, len(got))
			for _, call := range got {
				t.Logf("read (ended %v, reset %v, malformed %v, %d bytes):\n%s", call.Ended, call.Reset, call.Malformed, len(call.Body), call)
			}
			if c.forbidden {
				g.Expect(answer.refused()).To(BeTrue(), "a request HTTP/2 forbids is refused: %v", answer)
				g.Expect(got).To(BeEmpty(), "and reaches no application")
				return
			}
			if c.reset || c.open {
				// a gRPC call goes to the application before its body ends
				g.Expect(got).To(HaveLen(1))
				g.Expect(got[0].Ended).To(BeFalse(), "the application never reads a call the client did not end as complete")
				g.Expect(got[0].Reset).To(BeTrue(), "the application's stream is reset, as the client's was")
				return
			}
			g.Expect(len(got)).To(BeNumerically("<=", 1), "one call at most reaches the application")
			if len(got) == 0 {
				g.Expect(answer.refused()).To(BeTrue(), "a call the application did not read is refused: %v", answer)
				return
			}
			call := got[0]
			g.Expect(call.Malformed).To(BeFalse(), "the application reads a well-formed request")
			if !call.Ended {
				// the enforcer gave up on it: the client must know
				g.Expect(answer.refused()).To(BeTrue(), "a call the application did not read whole is refused: %v", answer)
				return
			}
			g.Expect(call.Body).To(Equal(c.body), "the application reads the message the client sent, no more, no less")
			checkForwardedCall(g, call)
			if !servesCreate(call.Path()) {
				return
			}
			// The application serves Create for the first tenant value
			// (grpc-go's metadata); the limiter must have counted it there.
			tenants := call.Values("x-tenant-id")
			g.Expect(tenants).NotTo(BeEmpty())
			probe := sendH2(t, addr, h2Call{fields: grpcFields(createMethod, tenants[0]), body: body}, nil)
			g.Expect(probe.grpcStatus).To(Equal("8"),
				"Create for tenant %q was served once and counted: the next call is over the limit of 1 (%v)", tenants[0], probe)
		})
	}
}

// checkForwardedCall holds what the application read to what HTTP/2 and
// gRPC allow: one :path and one content-type, a gRPC one; te only as
// trailers; no connection-specific field; trailers without pseudo-fields;
// the enforcer's forwarding fields only.
func checkForwardedCall(g Gomega, call *rawapp.Call) {
	for _, f := range call.Trailers {
		g.Expect(f.Name).To(Equal(strings.ToLower(f.Name)), "trailer names are lower case")
		g.Expect(f.Name).NotTo(HavePrefix(":"), "no pseudo-field in trailers")
		g.Expect(f.Name).NotTo(BeElementOf("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "host", "content-type", "content-length"),
			"a trailer HTTP forbids")
	}
	for _, f := range call.Fields {
		g.Expect(f.Name).To(Equal(strings.ToLower(f.Name)), "field names are lower case")
		switch f.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host":
			g.Expect(f.Name).To(BeEmpty(), "HTTP/2 forbids %s: %q", f.Name, f.Value)
		case "te":
			g.Expect(f.Value).To(Equal("trailers"))
		}
	}
	for _, name := range []string{":method", ":scheme", ":path", ":authority", "content-type"} {
		g.Expect(call.Values(name)).To(HaveLen(1), "one %s", name)
	}
	g.Expect(strings.ToLower(call.Values("content-type")[0])).To(HavePrefix("application/grpc"))
	// the client is no trusted proxy: the forwarding fields are the
	// enforcer's, none of the client's
	g.Expect(call.Values("x-forwarded-for")).To(Equal([]string{"127.0.0.1"}))
	g.Expect(call.Values("x-forwarded-host")).To(Equal(call.Values(":authority")))
	g.Expect(call.Values("x-forwarded-proto")).To(Equal([]string{"http"}))
	g.Expect(call.Values("forwarded")).To(BeEmpty())
	g.Expect(call.Values("x-real-ip")).To(BeEmpty())
}

// manyFields are n small distinct fields.
func manyFields(n int) [][2]string {
	out := make([][2]string, n)
	for i := range out {
		out[i] = [2]string{fmt.Sprintf("x-f%d", i), "v"}
	}
	return out
}
