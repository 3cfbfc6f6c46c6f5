package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestProxyForwardsUntilStopped(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Host+" "+r.URL.RequestURI()+" "+r.Header.Get("X-Forwarded-For"))
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "from the app")
	}))
	t.Cleanup(app.Close)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out, log := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runProxy(ctx, []string{"--listen", "127.0.0.1:0", "--upstream", app.URL}, log)
		log.Close()
	}()
	first, err := bufio.NewReader(out).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _, _ = io.Copy(io.Discard, out) }()
	g.Expect(first).To(ContainSubstring(" to " + app.URL))
	proxyURL := strings.Fields(first)[3]

	req, _ := http.NewRequest(http.MethodGet, proxyURL+"/orders?id=7", nil)
	req.Host = "shop.example"
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusTeapot))
	g.Expect(string(body)).To(Equal("from the app"))
	g.Expect(resp.Header.Get("X-Seen")).To(Equal("shop.example /orders?id=7 127.0.0.1"))

	stop()
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	http.DefaultClient.CloseIdleConnections()
	if resp, err = http.Get(proxyURL + "/"); err == nil {
		resp.Body.Close()
	}
	g.Expect(err).To(HaveOccurred(), "the proxy still answers once stopped")
}

func TestProxyOnlyForwardsToLoopback(t *testing.T) {
	g := NewWithT(t)
	err := runProxy(context.Background(), []string{"--listen", "127.0.0.1:0", "--upstream", "http://192.0.2.1:8080"}, io.Discard)
	g.Expect(err).To(MatchError(ContainSubstring("only sends load to loopback")))
}
