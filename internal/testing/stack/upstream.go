package stack

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// upstream is the application of one pod: it answers every request with
// 200 and a JSON echo, and counts what reaches it, so a test can tell that
// a refused request never did.
type upstream struct {
	pod     string
	servers []*http.Server
	served  atomic.Int64
}

// echo is the upstream's answer.
type echo struct {
	Pod    string `json:"pod"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Tenant string `json:"tenant,omitempty"`
	Plan   string `json:"plan,omitempty"`
}

// startUpstream listens on ip at each port.
func startUpstream(pod, ip string, ports []int32) (*upstream, error) {
	u := &upstream{pod: pod}
	for _, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
		if err != nil {
			u.stop()
			return nil, err
		}
		srv := &http.Server{Handler: u, ReadHeaderTimeout: 5 * time.Second}
		u.servers = append(u.servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				_ = ln.Close()
			}
		}()
	}
	return u, nil
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.served.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echo{
		Pod: u.pod, Method: r.Method, Path: r.URL.Path,
		Tenant: r.Header.Get("X-Tenant-ID"), Plan: r.Header.Get("X-Plan"),
	})
}

func (u *upstream) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range u.servers {
		_ = s.Shutdown(ctx)
	}
}
