//go:build scale

package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// replica is one sluice-manager process of the three.
type replica struct {
	name                 string
	args                 []string
	bin, log             string
	metrics, probe, prof string
	webhook              int
	proc                 *stack.Process
}

func newReplicas(bin, dir string, n int, common []string) ([]*replica, error) {
	ports, err := freeport.Loopback(4 * n)
	if err != nil {
		return nil, err
	}
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	var out []*replica
	for i := range n {
		r := &replica{
			name: fmt.Sprintf("manager-%d", i), bin: bin, log: filepath.Join(dir, fmt.Sprintf("manager-%d.log", i)),
			metrics: addr(ports[4*i]), probe: addr(ports[4*i+1]), prof: addr(ports[4*i+2]), webhook: ports[4*i+3],
		}
		r.args = append([]string{
			"--metrics-bind-address=" + r.metrics, "--health-probe-bind-address=" + r.probe,
			"--pprof-bind-address=" + r.prof, fmt.Sprintf("--webhook-port=%d", r.webhook),
		}, common...)
		out = append(out, r)
	}
	return out, nil
}

func (r *replica) start() error {
	p, err := stack.StartProcess(r.name, r.log, exec.Command(r.bin, r.args...))
	if err != nil {
		return err
	}
	r.proc = p
	return nil
}

func (r *replica) running() bool { return r.proc != nil && r.proc.Running() }

// waitReady waits for the replica's /readyz.
func (r *replica) waitReady(ctx context.Context) error {
	c := &http.Client{Timeout: time.Second}
	for {
		if resp, err := c.Get("http://" + r.probe + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.proc.Exited():
			return fmt.Errorf("%s exited: %s", r.name, r.proc.LogTail(3000))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", r.name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrape reads the replica's Prometheus metrics.
func (r *replica) scrape() (map[string]*dto.MetricFamily, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// leading says whether the replica holds the lease (controller-runtime's
// leader_election_master_status gauge).
func (r *replica) leading() bool {
	if !r.running() {
		return false
	}
	mf, err := r.scrape()
	if err != nil {
		return false
	}
	return sumOf(mf["leader_election_master_status"], nil) == 1
}

// cpuSeconds is the user and system CPU time the replica used so far.
func (r *replica) cpuSeconds() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.proc.Pid()))
	if err != nil {
		return 0, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// utime and stime are fields 14 and 15 of stat, 12 and 13 after comm and state.
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100, nil // USER_HZ
}

// rssBytes is the replica's resident set.
func (r *replica) rssBytes() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.proc.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// sumOf adds the values of a counter or gauge family's series whose labels
// match.
func sumOf(mf *dto.MetricFamily, match map[string]string) float64 {
	if mf == nil {
		return 0
	}
	total := 0.0
	for _, m := range mf.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		}
	}
	return total
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// histogram is a cumulative histogram: upper bounds and counts.
type histogram struct {
	bounds []float64
	counts []uint64
	total  uint64
}

func histogramOf(mf *dto.MetricFamily, match map[string]string) histogram {
	var h histogram
	if mf == nil {
		return h
	}
	for _, m := range mf.Metric {
		if m.Histogram == nil || !labelsMatch(m, match) {
			continue
		}
		for i, b := range m.Histogram.Bucket {
			if len(h.bounds) <= i {
				h.bounds = append(h.bounds, b.GetUpperBound())
				h.counts = append(h.counts, 0)
			}
			h.counts[i] += b.GetCumulativeCount()
		}
		h.total += m.Histogram.GetSampleCount()
	}
	return h
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]uint64, len(h.counts)), total: h.total - o.total}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(o.counts) {
			out.counts[i] -= o.counts[i]
		}
	}
	return out
}

// quantile is the upper bound of the bucket that holds quantile q.
func (h histogram) quantile(q float64) float64 {
	want := uint64(q * float64(h.total))
	for i, c := range h.counts {
		if c >= want {
			return h.bounds[i]
		}
	}
	return -1
}

// webhookFront stands for the webhook's Service: the API server calls one
// address, and each connection goes to a replica that accepts it, as
// kube-proxy sends it to a ready endpoint.
type webhookFront struct {
	ln       net.Listener
	backends func() []string
	next     atomic.Uint64
	wg       sync.WaitGroup
}

func startWebhookFront(port int, backends func() []string) (*webhookFront, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	f := &webhookFront{ln: ln, backends: backends}
	f.wg.Go(f.serve)
	return f, nil
}

func (f *webhookFront) serve() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.forward(conn)
	}
}

func (f *webhookFront) forward(conn net.Conn) {
	defer conn.Close()
	backends := f.backends()
	start := int(f.next.Add(1))
	for i := range backends {
		up, err := net.DialTimeout("tcp", backends[(start+i)%len(backends)], time.Second)
		if err != nil {
			continue
		}
		defer up.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, conn); _ = up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
		go func() { _, _ = io.Copy(conn, up); _ = conn.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
		<-done
		<-done
		return
	}
}

func (f *webhookFront) close() {
	_ = f.ln.Close()
	f.wg.Wait()
}

// raiseFileLimit lifts RLIMIT_NOFILE to its hard limit for this process
// and the processes it starts (Go does so for itself, not for its
// children): the fleet holds a listener per pod and the accepted end of
// each connection the manager keeps.
func raiseFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Max < need {
		return fmt.Errorf("RLIMIT_NOFILE's hard limit is %d, the suite needs %d open files (ulimit -Hn)", lim.Max, need)
	}
	lim.Cur = lim.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}
