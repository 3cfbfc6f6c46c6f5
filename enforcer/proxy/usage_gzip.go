package proxy

import (
	"compress/gzip"
	"errors"
	"io"
	"sync"
)

// gunzip decodes a gzip-encoded body as its bytes pass. gzip.Reader pulls
// its input, so it runs in a goroutine of its own, fed through a pipe:
// write returns once the goroutine has taken the bytes, and finish ends
// it. What it holds is the decoder's 32 KiB window and one buffer.
type gunzip struct {
	pw   *io.PipeWriter
	done chan struct{}
	err  error // why the body could not be decoded, read after done
}

// errAbandoned ends a decoder whose reader was dropped before finish.
var errAbandoned = errors.New("usage reader dropped before the answer ended")

// gzipReaders keep decoders between answers: each is ~45 KiB.
var gzipReaders sync.Pool

// startGunzip decodes into body until finish.
func startGunzip(body usageBody) *gunzip {
	pr, pw := io.Pipe()
	g := &gunzip{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		g.err = inflate(pr, body)
		// a decoder that stopped early takes no more: write returns at once
		pr.CloseWithError(io.ErrClosedPipe)
	}()
	return g
}

// inflate writes to body what r decodes to.
func inflate(r io.Reader, body usageBody) error {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(r)
	} else {
		err = zr.Reset(r)
	}
	if err != nil {
		return err
	}
	defer gzipReaders.Put(zr)
	buf := make([]byte, 8<<10)
	for {
		n, err := zr.Read(buf)
		body.write(buf[:n])
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// write hands p to the decoder; it is not held after write returns.
func (g *gunzip) write(p []byte) { _, _ = g.pw.Write(p) }

// finish ends the body and waits for the decoder to end: nil when the
// body was whole gzip.
func (g *gunzip) finish() error {
	_ = g.pw.Close()
	<-g.done
	return g.err
}

// abandon ends the decoder of a reader dropped without finish.
func (g *gunzip) abandon() { _ = g.pw.CloseWithError(errAbandoned) }
