package admin

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// pushDoc is a compiled configuration of namespace shop at revision,
// whose one policy admits requests per minute.
func pushDoc(revision string, requests string) string {
	return `{"schema": "sluice.dev/enforcer-config/v1", "namespace": "shop", "revision": ` + revision + `, "policies": [{
  "name": "api", "uid": "u-1", "generation": 1, "selector": {}, "replicas": 1, "upstreamPort": 8080, "mode": "Enforce",
  "failureMode": "Open", "timeout": "50ms", "responseHeaders": "Both", "salt": "s",
  "rules": [{"name": "all", "match": {}, "algorithm": "FixedWindow", "cost": 1,
    "identity": {"sources": [{"shared": {}}]}, "limits": [{"requests": ` + requests + `, "period": "1m"}]}]}]}`
}

// pushServer is an admin listener over a real Reloader that started from
// a file at revision 5 (10 requests a minute); applied holds the limit in
// service.
func pushServer(t *testing.T, access func(*Options)) (*Server, *int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(pushDoc("5", "10")), 0o600); err != nil {
		t.Fatal(err)
	}
	var applied int64
	r := reload.NewReloader(&reload.Source{ConfigPath: path}, func(l *reload.Loaded) error {
		applied = l.Config.Policies[0].Rules[0].Limits[0].Requests
		return nil
	}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	opts := Options{Pod: status.Pod{Name: "api-0", Namespace: "shop"}, Snapshots: unloaded{}, Reloads: r, Delivery: r}
	access(&opts)
	return New(opts), &applied
}

func push(h http.Handler, remote, authorization, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPut, status.ConfigPath, strings.NewReader(body))
	req.RemoteAddr = remote
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestPushNeedsTheWriteToken: the application shares the pod's network,
// so a push is taken with the write token only: not without a token, not
// with the read token, not from a trusted or loopback peer.
func TestPushNeedsTheWriteToken(t *testing.T) {
	const read, write = "read-token", "write-token"
	loopback := netip.MustParseAddr("127.0.0.1")
	withTokens := func(o *Options) { o.StatusToken, o.WriteToken = staticToken(read), staticToken(write) }
	cases := []struct {
		name          string
		access        func(*Options)
		authorization string
		code          int
	}{
		{"no write token configured, trusted loopback peer", func(o *Options) { o.TrustedPeers = []netip.Addr{loopback} }, "", http.StatusForbidden},
		{"no write token configured, read token", func(o *Options) { o.StatusToken = staticToken(read) }, "Bearer " + read, http.StatusForbidden},
		{"no credential", withTokens, "", http.StatusUnauthorized},
		{"read token", withTokens, "Bearer " + read, http.StatusForbidden},
		{"wrong token", withTokens, "Bearer guess", http.StatusUnauthorized},
		{"write token", withTokens, "Bearer " + write, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv, applied := pushServer(t, tc.access)
			w := push(srv, "127.0.0.1:40000", tc.authorization, pushDoc("6", "1000000"))
			g.Expect(w.Code).To(Equal(tc.code), w.Body.String())
			if tc.code != http.StatusOK {
				g.Expect(*applied).To(Equal(int64(10)), "a refused push changed the limit")
				return
			}
			g.Expect(*applied).To(Equal(int64(1000000)))
			var answer status.PushAnswer
			g.Expect(json.Unmarshal(w.Body.Bytes(), &answer)).To(Succeed())
			g.Expect(answer.Outcome).To(Equal(status.PushApplied))
			g.Expect(answer.Revision).To(Equal(int64(6)))
			g.Expect(answer.Status.Config.Revision).To(Equal(int64(6)))
		})
	}
}

// TestPushOlderIsAnsweredAsSuch: an older push is a 409 that says what is
// in service, not an error to retry; a bad one is a 422 and changes nothing.
func TestPushOlderIsAnsweredAsSuch(t *testing.T) {
	g := NewWithT(t)
	srv, applied := pushServer(t, func(o *Options) { o.WriteToken = staticToken("w") })
	w := push(srv, "10.0.0.9:1", "Bearer w", pushDoc("4", "99"))
	g.Expect(w.Code).To(Equal(http.StatusConflict), w.Body.String())
	var answer status.PushAnswer
	g.Expect(json.Unmarshal(w.Body.Bytes(), &answer)).To(Succeed())
	g.Expect(answer.Outcome).To(Equal(status.PushOlder))
	g.Expect(answer.Revision).To(Equal(int64(5)))
	g.Expect(*applied).To(Equal(int64(10)))

	w = push(srv, "10.0.0.9:1", "Bearer w", `{"schema": "sluice.dev/enforcer-config/v1"}`)
	g.Expect(w.Code).To(Equal(http.StatusUnprocessableEntity), w.Body.String())
	g.Expect(*applied).To(Equal(int64(10)))

	req := httptest.NewRequest(http.MethodPut, status.ConfigPath, strings.NewReader(pushDoc("7", "99")))
	req.Header.Set("Authorization", "Bearer w")
	req.Header.Set(status.LabelsHeader, `["app"]`)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	g.Expect(rec.Code).To(Equal(http.StatusBadRequest), rec.Body.String())
	g.Expect(*applied).To(Equal(int64(10)))
}
