//go:build overload && !race

package enforcer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enforcerstatus "github.com/sluice-dev/sluice/enforcer/status"
)

// The overload tests flood one enforcer process with requests to an
// application that answers only when the test lets it, and read the
// process's resident memory. They need the binary without the race
// detector, whose memory says nothing of the enforcer's, and the machine to
// themselves: their floods would slow every test beside them, and others'
// load would blur their figures. make test runs them alone, after the rest:
//
//	go test -tags overload -run '^TestOverload' ./test/enforcer/

const overloadPolicy = `
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: all, algorithm: TokenBucket, limits: [{requests: 1000000, period: 1s, burst: 1000000}]}]`

// slowApp answers every request once release is closed; /fast at once.
type slowApp struct {
	url     string
	release chan struct{}
	waiting atomic.Int64
}

func newSlowApp(t *testing.T) *slowApp {
	a := &slowApp{release: make(chan struct{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/fast" {
			a.waiting.Add(1)
			defer a.waiting.Add(-1)
			select {
			case <-a.release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.MaxHeaderBytes = 1 << 20
	srv.Start()
	t.Cleanup(func() {
		a.let()
		srv.Close()
	})
	a.url = srv.URL
	return a
}

var releaseOnce sync.Map

func (a *slowApp) let() {
	if _, done := releaseOnce.LoadOrStore(a, true); !done {
		close(a.release)
	}
}

// rss is the resident memory of pid, in bytes.
func rss(t *testing.T, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// peakRSS samples pid's resident memory until stop is closed and returns
// the highest.
func peakRSS(t *testing.T, pid int, stop <-chan struct{}) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if r := rss(t, pid); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int64 { <-done; return peak.Load() }
}

// oneH2CConn is a client of one cleartext HTTP/2 connection, with
// streams up to the server's limit.
func oneH2CConn() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols), MaxConnsPerHost: 1,
		HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// floodOutcome counts what the flood's requests got.
type floodOutcome struct {
	mu     sync.Mutex
	status map[int]int
	errs   int
}

func (o *floodOutcome) add(status int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.errs++
		return
	}
	if o.status == nil {
		o.status = map[int]int{}
	}
	o.status[status]++
}

func (o *floodOutcome) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("statuses %v, errors %d", o.status, o.errs)
}

// floodH2C opens conns HTTP/2 connections with streams requests each, as
// tenant, and returns once they are all sent; wait collects them.
func floodH2C(ctx context.Context, url string, tenant func(int) string, conns, streams int, out *floodOutcome) (wait func()) {
	var wg sync.WaitGroup
	for i := range conns {
		c := oneH2CConn()
		for j := range streams {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/slow", nil)
				req.Header.Set("X-Tenant-ID", tenant(i*streams+j))
				resp, err := c.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					out.add(resp.StatusCode, nil)
					return
				}
				out.add(0, err)
			})
		}
	}
	return wg.Wait
}

// floodHTTP1 opens conns HTTP/1.1 connections, each holding one request.
func floodHTTP1(ctx context.Context, addr, tenant string, conns int, out *floodOutcome) (wait func()) {
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				out.add(0, err)
				return
			}
			defer c.Close()
			context.AfterFunc(ctx, func() { c.Close() })
			if _, err := fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: api\r\nX-Tenant-ID: %s\r\n\r\n", tenant); err != nil {
				out.add(0, err)
				return
			}
			buf := make([]byte, 12)
			if _, err := io.ReadFull(c, buf); err != nil {
				out.add(0, err)
				return
			}
			code, _ := strconv.Atoi(string(buf[9:12]))
			out.add(code, nil)
		})
	}
	return wg.Wait
}

// goodClient sends one request at a time as tenant "good" until stop, and
// reports how many succeeded of how many, and the slowest.
func goodClient(url string, stop <-chan struct{}) func() (ok, all int, slowest time.Duration) {
	var ok, all int
	var slowest time.Duration
	done := make(chan struct{})
	c := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			req, _ := http.NewRequest(http.MethodGet, url+"/fast", nil)
			req.Header.Set("X-Tenant-ID", "good")
			resp, err := c.Do(req)
			all++
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok++
				}
			}
			slowest = max(slowest, time.Since(start))
		}
	}()
	return func() (int, int, time.Duration) { <-done; return ok, all, slowest }
}

// memoryLimit is the injected sidecar's default memory limit, which the
// enforcer must stay under; GOMEMLIMIT is set to 80% of it, as the
// injector sets it.
const (
	memoryLimit = 128 << 20
	goMemLimit  = memoryLimit * 8 / 10
)

// TestOverloadH2C floods the enforcer as one attacker does: 40 cleartext
// HTTP/2 connections with 250 streams each, to an application that does
// not answer, all as one tenant.
func TestOverloadH2C(t *testing.T) {
	testOverload(t, "h2c, one tenant", true, func(ctx context.Context, in *instance, out *floodOutcome) func() {
		return floodH2C(ctx, in.url, func(int) string { return "attacker" }, 40, 250, out)
	})
}

// TestOverloadH2CManyTenants is the same flood, each stream another
// tenant: the global bound holds where the tenant share cannot.
func TestOverloadH2CManyTenants(t *testing.T) {
	testOverload(t, "h2c, many tenants", false, func(ctx context.Context, in *instance, out *floodOutcome) func() {
		return floodH2C(ctx, in.url, func(i int) string { return "attacker-" + strconv.Itoa(i) }, 40, 250, out)
	})
}

// TestOverloadHTTP1 holds 5,000 HTTP/1.1 connections, a request each.
func TestOverloadHTTP1(t *testing.T) {
	testOverload(t, "http1, one tenant", true, func(ctx context.Context, in *instance, out *floodOutcome) func() {
		return floodHTTP1(ctx, strings.TrimPrefix(in.url, "http://"), "attacker", 5000, out)
	})
}

func testOverload(t *testing.T, name string, oneTenant bool, flood func(context.Context, *instance, *floodOutcome) func()) {
	app := newSlowApp(t)
	in := start(t, setup{policies: policy("api", overloadPolicy), upstream: app.url,
		env:  []string{"GOMEMLIMIT=" + strconv.Itoa(goMemLimit)},
		args: []string{"--response-header-timeout=0"}})
	idle := rss(t, in.cmd.Process.Pid)
	before := enforcerOverload(t, in)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	peak := peakRSS(t, in.cmd.Process.Pid, stop)
	var out floodOutcome
	wait := flood(ctx, in, &out)
	time.Sleep(2 * time.Second) // the flood in place
	good := goodClient(in.url, stop)
	time.Sleep(3 * time.Second)
	held := app.waiting.Load()
	during := enforcerOverload(t, in)
	resp, adminErr := (&http.Client{Timeout: 2 * time.Second}).Get(in.admin + "/healthz")
	if adminErr == nil {
		resp.Body.Close()
	}
	close(stop)
	ok, all, slowest := good()
	peakBytes := peak()
	app.let()
	wait()
	t.Logf("%s: idle RSS %d MiB, peak %d MiB (limit %d MiB); %d requests held by the application (bound %d, %d per tenant); flood %s; "+
		"well-behaved client %d/%d ok, slowest %s",
		name, idle>>20, peakBytes>>20, memoryLimit>>20, held, before.MaxInFlight, before.MaxInFlightPerTenant, &out, ok, all, slowest.Round(time.Millisecond))

	if adminErr != nil {
		t.Errorf("the admin port did not answer during the flood: %v", adminErr)
	}
	if peakBytes >= memoryLimit {
		t.Errorf("resident memory peaked at %d MiB, over the %d MiB limit", peakBytes>>20, memoryLimit>>20)
	}
	if held > int64(before.MaxInFlight) {
		t.Errorf("the application held %d requests, over the bound of %d", held, before.MaxInFlight)
	}
	if oneTenant && held > int64(before.MaxInFlightPerTenant) {
		t.Errorf("one tenant had %d requests in flight, over its share of %d", held, before.MaxInFlightPerTenant)
	}
	out.mu.Lock()
	shed := out.status[http.StatusServiceUnavailable]
	out.mu.Unlock()
	if shed == 0 {
		t.Errorf("nothing of the flood was refused: %s", &out)
	}
	if !during.Overloaded && !oneTenant {
		t.Errorf("/status did not say overloaded during the flood: %+v", during)
	}
	if oneTenant && (all == 0 || ok < all*9/10) {
		t.Errorf("a well-behaved tenant got %d of %d requests through during one tenant's flood", ok, all)
	}
	// Once the flood has ended, everything is back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := enforcerOverload(t, in)
		r, err := tryDo(context.Background(), http.MethodGet, in.url+"/fast", "X-Tenant-ID: after")
		if err == nil && r.status == http.StatusOK && !st.Overloaded && st.InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recovered 10s after the flood: %+v, %v %v", st, r.status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// enforcerOverload is the overload part of the enforcer's /status (served
// to loopback peers without a token).
func enforcerOverload(t *testing.T, in *instance) enforcerstatus.Overload {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(in.admin + enforcerstatus.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc enforcerstatus.Document
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Overload == nil {
		t.Fatal("/status has no overload")
	}
	return *doc.Overload
}
