package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// StartSentinel starts a Redis Sentinel in t.TempDir() that monitors
// primary under the name master with a quorum of one, and stops it when the
// test ends. Its URL() is the Sentinel's own address; clients find the
// primary through it, e.g. redis+sentinel://<addr>?master_name=<master>.
func StartSentinel(t testing.TB, primary *Server, master string) *Server {
	t.Helper()
	dir := t.TempDir()
	host, port, err := net.SplitHostPort(primary.Addr())
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "sentinel.conf")
	line := fmt.Sprintf("sentinel monitor %s %s %s 1\n", master, host, port)
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
