package rawapp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Call is a request stream as a cleartext HTTP/2 application read it off
// the wire: its header fields in the order and spelling sent (pseudo-fields
// included), its body, its trailer fields, and how it ended.
type Call struct {
	Fields   []hpack.HeaderField
	Body     []byte
	Trailers []hpack.HeaderField
	// Ended: the sender ended the stream (END_STREAM); Reset: it reset
	// it. Neither: the connection closed first. Malformed: its header
	// block broke HTTP/2's rules (an upper-case or connection-specific
	// field, say); Fields is then empty.
	Ended, Reset, Malformed bool
}

// Values are the values of the fields named name, exactly as sent.
func (c *Call) Values(name string) []string {
	var vv []string
	for _, f := range c.Fields {
		if f.Name == name {
			vv = append(vv, f.Value)
		}
	}
	return vv
}

// Path is the :path the call was sent, "" when it had none or several.
func (c *Call) Path() string {
	if p := c.Values(":path"); len(p) == 1 {
		return p[0]
	}
	return ""
}

// H2CApp is a raw cleartext HTTP/2 application (ServeH2C).
type H2CApp struct {
	URL string
	// Calls are the streams read, each once it ended, was reset or its
	// connection closed.
	Calls <-chan *Call
	open  *atomic.Int64
}

// Open is how many streams the application has open: begun, not yet
// ended, reset or closed. A call it sends on Calls is no longer open.
func (a *H2CApp) Open() int64 { return a.open.Load() }

// ServeH2C runs a cleartext HTTP/2 (prior knowledge) gRPC application on a
// raw socket until the test ends, reading frames as they are sent. It
// answers every stream the sender ends with gRPC status 0 (headers, an
// empty message, trailers) and sends each stream on calls once it ended,
// was reset, or its connection closed.
func ServeH2C(t testing.TB) *H2CApp {
	t.Helper()
	out := make(chan *Call, 1000)
	open := new(atomic.Int64)
	url := serveConns(t, func(conn net.Conn) { serveH2C(conn, out, open) })
	return &H2CApp{URL: url, Calls: out, open: open}
}

// serveH2C reads one connection's frames until it closes.
func serveH2C(conn net.Conn, out chan<- *Call, streams *atomic.Int64) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(conn, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 16 << 20
	// the decoder keeps field names as sent: the sender's spelling is what
	// the test looks at
	var enc bytes.Buffer
	henc := hpack.NewEncoder(&enc)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 16 << 20})
	open := map[uint32]*Call{}
	done := func(id uint32, c *Call) {
		delete(open, id)
		out <- c
		streams.Add(-1)
	}
	defer func() {
		for id, c := range open {
			done(id, c)
		}
	}()
	answer := func(id uint32) {
		write := func(end bool, fields ...string) {
			enc.Reset()
			for i := 0; i < len(fields); i += 2 {
				_ = henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc.Bytes(), EndHeaders: true, EndStream: end})
		}
		write(false, ":status", "200", "content-type", "application/grpc")
		_ = fr.WriteData(id, false, []byte{0, 0, 0, 0, 0})
		write(true, "grpc-status", "0")
	}
	for {
		f, err := fr.ReadFrame()
		var se http2.StreamError
		if errors.As(err, &se) {
			out <- &Call{Malformed: true}
			_ = fr.WriteRSTStream(se.StreamID, se.Code)
			continue
		}
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			id := f.StreamID
			c := open[id]
			if c == nil {
				c = &Call{Fields: f.Fields}
				open[id] = c
				streams.Add(1)
			} else {
				c.Trailers = append(c.Trailers, f.Fields...)
			}
			if f.StreamEnded() {
				c.Ended = true
				answer(id)
				done(id, c)
			}
		case *http2.DataFrame:
			id := f.StreamID
			c := open[id]
			if c == nil {
				continue
			}
			c.Body = append(c.Body, f.Data()...)
			if n := uint32(len(f.Data())); n > 0 {
				_ = fr.WriteWindowUpdate(0, n)
				_ = fr.WriteWindowUpdate(id, n)
			}
			if f.StreamEnded() {
				c.Ended = true
				answer(id)
				done(id, c)
			}
		case *http2.RSTStreamFrame:
			if c := open[f.StreamID]; c != nil {
				c.Reset = true
				done(f.StreamID, c)
			}
		case *http2.GoAwayFrame:
			return
		}
	}
}

// String is the call's fields, one a line, as sent, then its trailers.
func (c *Call) String() string {
	var b strings.Builder
	for _, f := range c.Fields {
		b.WriteString(f.Name + ": " + f.Value + "\n")
	}
	for _, f := range c.Trailers {
		b.WriteString("trailer " + f.Name + ": " + f.Value + "\n")
	}
	return b.String()
}
