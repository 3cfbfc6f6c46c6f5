package main

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// DrainPath is served on the admin listener for the application
// containers' preStop hook (the injection webhook adds it). On a pod's
// deletion the kubelet calls it before it stops the application; the
// enforcer, a native sidecar, is only stopped after the application.
const DrainPath = "/drain"

// drainer answers GET /drain: the proxy stops keeping client connections
// alive (idle HTTP/1.1 ones are closed, busy ones after their response;
// an HTTP/2 connection gets GOAWAY once its open streams end), so clients
// move to another pod while this one still serves, and the answer waits
// delay, so the kubelet stops the application only once the pod has left
// its Services' endpoints. Without it a rolling restart fails requests:
// the application exits on SIGTERM while kube-proxy still sends new
// connections to the pod, and kept-alive clients keep sending to an
// enforcer whose application is gone (502).
type drainer struct {
	delay time.Duration
	proxy *http.Server
	log   *slog.Logger
	once  sync.Once
}

func (d *drainer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.once.Do(func() {
		d.log.Info("draining: client connections are closed after their response", "delay", d.delay.String())
		d.proxy.SetKeepAlivesEnabled(false)
	})
	t := time.NewTimer(d.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("drained\n"))
}
