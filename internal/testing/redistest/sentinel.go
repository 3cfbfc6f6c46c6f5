package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StartSentinel starts a Redis Sentinel in t.TempDir() that monitors
// primary under the name master with a quorum of one, and stops it when the
// test ends. Its URL() is the Sentinel's own address; clients find the
// primary through it, e.g. redis+sentinel://<addr>?master_name=<master>.
func StartSentinel(t testing.TB, primary *Server, master string) *Server {
	t.Helper()
	return startSentinel(t, primary, master, 1, "")
}

// StartSentinels starts n Sentinels that monitor primary under the name
// master with the given quorum, each deeming the primary down after
// downAfter of silence and failing over within a few seconds: the set a
// failover test kills a primary under. They stop when the test ends.
func StartSentinels(t testing.TB, primary *Server, master string, n, quorum int, downAfter time.Duration) []*Server {
	t.Helper()
	extra := fmt.Sprintf("sentinel down-after-milliseconds %[1]s %[2]d\nsentinel failover-timeout %[1]s %[3]d\n",
		master, downAfter.Milliseconds(), max(3*downAfter.Milliseconds(), 2000))
	out := make([]*Server, n)
	for i := range out {
		out[i] = startSentinel(t, primary, master, quorum, extra)
	}
	return out
}

// StartReplica starts a standalone redis-server replicating the primary at
// addr (a Server's Addr, or a proxy in front of it), and waits until the
// replication link is up.
func StartReplica(t testing.TB, addr string) *Server {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	r := Start(t, WithArgs("--replicaof", host, port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := r.Client().Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: replica %s did not connect to %s: %s", r.Addr(), addr, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startSentinel(t testing.TB, primary *Server, master string, quorum int, extra string) *Server {
	t.Helper()
	dir := t.TempDir()
	host, port, err := net.SplitHostPort(primary.Addr())
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "sentinel.conf")
	line := fmt.Sprintf("sentinel monitor %s %s %s %d\n", master, host, port, quorum) + extra
	if err := os.WriteFile(conf, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := newServer(dir, false, false, []Option{func(c *config) { c.sentinelConf = conf }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
