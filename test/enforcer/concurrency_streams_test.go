package enforcer

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/websocket"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

// A websocket and a long download hold their Concurrency slot for as long
// as they last, and give it back when either side ends them.

// wsApp is a websocket application: it answers each text message with
// "echo " and the message, and ends the websocket on the message "close".
// It answers other requests "ok".
func wsApp(t *testing.T) string {
	ws := websocket.Handler(func(ws *websocket.Conn) {
		for {
			var msg string
			if websocket.Message.Receive(ws, &msg) != nil || msg == "close" {
				return
			}
			if websocket.Message.Send(ws, "echo "+msg) != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		ws.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// dialWS opens a websocket of tenant through in.
func dialWS(in *instance, tenant string) (*websocket.Conn, error) {
	host := strings.TrimPrefix(in.url, "http://")
	cfg, err := websocket.NewConfig("ws://"+host+"/socket", "http://"+host)
	if err != nil {
		return nil, err
	}
	cfg.Header.Set("X-Tenant-ID", tenant)
	return websocket.DialConfig(cfg)
}

// echoes sends msg on ws and expects the application's echo.
func echoes(ws *websocket.Conn, msg string) {
	Expect(ws.SetDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
	Expect(websocket.Message.Send(ws, msg)).To(Succeed())
	var got string
	Expect(websocket.Message.Receive(ws, &got)).To(Succeed())
	Expect(got).To(Equal("echo " + msg))
}

// refusedWhileHeld expects another request of tenant through in to be
// refused by the Concurrency rule, and one of another tenant admitted.
func refusedWhileHeld(t *testing.T, in *instance, tenant string) {
	t.Helper()
	r := get(t, in.url+"/anything", "X-Tenant-ID: "+tenant)
	Expect(r.status).To(Equal(http.StatusTooManyRequests), r.body)
	Expect(r.header.Get("RateLimit-Policy")).To(Equal(`"php/workers";q=1;qu="concurrent-requests"`))
	Expect(r.body).To(ContainSubstring("allows 1 requests in flight at once"))
	other := get(t, in.url+"/anything", "X-Tenant-ID: other-"+tenant)
	Expect(other.status).To(Equal(http.StatusOK), "another tenant has a slot of its own: %s", other.body)
}

func TestConcurrencyWebsocketHoldsItsSlotUntilEitherSideCloses(t *testing.T) {
	RegisterTestingT(t)
	addrs, err := freeport.LoopbackAddrs(1)
	Expect(err).NotTo(HaveOccurred())
	debugAddr := addrs[0]
	in := start(t, setup{policies: concurrencyPolicy(1, "Closed", ""), upstream: wsApp(t),
		args: []string{"--debug-listen", debugAddr}})

	t.Run("client closes", func(t *testing.T) {
		RegisterTestingT(t)
		ws, err := dialWS(in, "client-closes")
		Expect(err).NotTo(HaveOccurred())
		defer ws.Close()
		echoes(ws, "one")
		refusedWhileHeld(t, in, "client-closes")
		_, err = dialWS(in, "client-closes")
		Expect(err).To(HaveOccurred(), "a second websocket of the tenant is refused")

		r := get(t, "http://"+debugAddr+"/debug/tenant?policy=php&rule=workers&tenant=client-closes")
		Expect(r.status).To(Equal(http.StatusOK), r.body)
		var usage struct {
			Remaining int64 `json:"remaining"`
			Slots     []struct {
				Enforcer string `json:"enforcer"`
				Slots    int64  `json:"slots"`
			} `json:"slots"`
		}
		Expect(json.Unmarshal([]byte(r.body), &usage)).To(Succeed(), r.body)
		Expect(usage.Remaining).To(Equal(int64(0)))
		Expect(usage.Slots).To(HaveLen(1), "the enforcer holding the websocket's slot: %s", r.body)
		Expect(usage.Slots[0].Slots).To(Equal(int64(1)))

		// past the slot's expiry, the open websocket still holds it: the
		// enforcer renews it for as long as the websocket lasts
		time.Sleep(limiter.SlotExpiry + limiter.SlotRenewal)
		echoes(ws, "two")
		refusedWhileHeld(t, in, "client-closes")

		Expect(ws.Close()).To(Succeed())
		admitsSoon(t, in, "client-closes")
	})
	t.Run("application closes", func(t *testing.T) {
		RegisterTestingT(t)
		ws, err := dialWS(in, "app-closes")
		Expect(err).NotTo(HaveOccurred())
		defer ws.Close()
		echoes(ws, "one")
		refusedWhileHeld(t, in, "app-closes")

		Expect(websocket.Message.Send(ws, "close")).To(Succeed())
		var msg string
		Expect(ws.SetDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
		Expect(websocket.Message.Receive(ws, &msg)).To(MatchError(io.EOF), "the application ended the websocket")
		admitsSoon(t, in, "app-closes")
	})
}

// downloadApp is an application sending GET /download?ms=N as a body of
// one chunk of chunkSize bytes every 50 ms for N ms (chunks larger than the
// buffers on the way, which hold back a body of known length), with a
// Content-Length when the query has length=1 (a file) and chunked
// otherwise (a generated export). With stall=1 it stops after the first
// chunk, as an application preparing the rest would, until its connection
// ends. It counts the downloads broken off before their end.
type downloadApp struct {
	url    string
	broken atomic.Int64
}

const chunkSize = 16 << 10

func newDownloadApp(t *testing.T) *downloadApp {
	a := &downloadApp{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/download" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		q := r.URL.Query()
		ms, _ := strconv.Atoi(q.Get("ms"))
		const every = 50 * time.Millisecond
		chunk := bytes.Repeat([]byte{'x'}, chunkSize)
		chunks := int(time.Duration(ms) * time.Millisecond / every)
		if q.Get("length") == "1" {
			w.Header().Set("Content-Length", strconv.Itoa(chunks*chunkSize))
		}
		rc := http.NewResponseController(w)
		for i := range chunks {
			if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
				a.broken.Add(1)
				return
			}
			pause := every
			if i == 0 && q.Get("stall") == "1" {
				pause = time.Duration(ms) * time.Millisecond
			}
			select {
			case <-time.After(pause):
			case <-r.Context().Done():
				a.broken.Add(1)
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// firstBytes is how much of a download startDownload reads.
const firstBytes = 1 << 10

// startDownload sends GET path of tenant through in and returns the
// response once its first bytes have come.
func startDownload(t *testing.T, in *instance, path, tenant string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, in.url+path, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-Tenant-ID", tenant)
	// a connection of its own, so that hanging up closes it
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	Expect(resp.Header.Get("RateLimit-Policy")).To(Equal(`"php/workers";q=1;qu="concurrent-requests"`))
	// not a whole chunk: the enforcer, like httputil.ReverseProxy, may
	// hold back the end of a read of a body of known length until more
	// comes
	_, err = io.ReadFull(resp.Body, make([]byte, firstBytes))
	Expect(err).NotTo(HaveOccurred())
	return resp
}

func TestConcurrencyLongDownloadHoldsItsSlotUntilReadOrHungUp(t *testing.T) {
	RegisterTestingT(t)
	app := newDownloadApp(t)
	in := start(t, setup{policies: concurrencyPolicy(1, "Closed", ""), upstream: app.url})

	for _, length := range []string{"0", "1"} {
		t.Run("read to the end, length="+length, func(t *testing.T) {
			RegisterTestingT(t)
			tenant := "reader-" + length
			resp := startDownload(t, in, "/download?ms=2500&length="+length, tenant)
			defer resp.Body.Close()
			refusedWhileHeld(t, in, tenant)
			rest, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			Expect(firstBytes+len(rest)).To(Equal(50*chunkSize), "the whole download")
			admitsSoon(t, in, tenant)
		})
		for _, stall := range []string{"0", "1"} {
			t.Run("hung up half way, length="+length+", stall="+stall, func(t *testing.T) {
				RegisterTestingT(t)
				tenant := "quitter-" + length + "-" + stall
				broken := app.broken.Load()
				// longer than the slot's expiry and the wait of admitsSoon:
				// the slot comes back because it was given back, not
				// because the download ended or the slot expired
				resp := startDownload(t, in, "/download?ms=60000&length="+length+"&stall="+stall, tenant)
				refusedWhileHeld(t, in, tenant)
				time.Sleep(time.Second)
				refusedWhileHeld(t, in, tenant)
				Expect(resp.Body.Close()).To(Succeed())
				admitsSoon(t, in, tenant)
				Eventually(app.broken.Load, 10*time.Second, 20*time.Millisecond).Should(Equal(broken+1),
					"the application's download was broken off")
			})
		}
	}
}
