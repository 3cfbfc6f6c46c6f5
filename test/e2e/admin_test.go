package e2e

import (
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/stack"
)

const adminPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: admin}
spec:
  selector: {matchLabels: {app: admin}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: all, algorithm: FixedWindow, limits: [{requests: 5, period: 1h}]}]
`

var _ = Describe("The enforcer's admin and debug listeners", Ordered, func() {
	const ns = "e2e-admin"
	var ep stack.Endpoint
	var do func(method, url, authorization string) (int, string)
	BeforeAll(func(ctx SpecContext) {
		ep = deploy(ctx, ns, adminPolicy, "admin", 8080, 1)[0]
		expectReady(ctx, ns, "admin", 1)
	})

	get := func(url, authorization string) (int, string) { return do(http.MethodGet, url, authorization) }
	do = func(method, url, authorization string) (int, string) {
		GinkgoHelper()
		req, err := http.NewRequest(method, url, nil)
		Expect(err).NotTo(HaveOccurred())
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := httpClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	It("serves /status only with the namespace's token, which no pod spec holds", func(ctx SpecContext) {
		token, err := sluice.StatusToken(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(token).To(HaveLen(43))
		for _, auth := range []string{"", "Bearer " + strings.Repeat("x", 43)} {
			code, body := get(ep.Admin+"/status", auth)
			Expect(code).To(Equal(http.StatusUnauthorized))
			Expect(body).NotTo(ContainSubstring(`"policies"`))
		}
		code, body := get(ep.Admin+"/status", "Bearer "+token)
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring(`"name": "admin"`))

		pod, err := sluice.Kubectl(ctx, "get", "pod", "-n", ns, ep.Pod, "-o", "yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(pod).NotTo(ContainSubstring(token))
	})

	It("keeps probes and metrics open and reveals nothing on them", func() {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			code, _ := get(ep.Admin+path, "")
			Expect(code).To(Equal(http.StatusOK), path)
		}
		_, body := get(ep.Admin+"/readyz", "")
		Expect(body).To(Equal("ok\n"))
	})

	It("serves /debug on the pod's loopback, and on the admin port only with the token", func() {
		request(ep, http.MethodGet, "/x", "X-Tenant-ID", "acme")
		code, _ := get(ep.Admin+"/debug/tenant?policy=admin&rule=all&tenant=acme", "")
		Expect(code).To(Equal(http.StatusUnauthorized))
		Expect(ep.Debug).To(HavePrefix("http://" + ep.IP + ":9902"))
		code, body := get(ep.Debug+"/debug/tenant?policy=admin&rule=all&tenant=acme", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(`"remaining": 4`))
	})

	It("resets a tenant with the write token only, which no pod spec holds either", func(ctx SpecContext) {
		for range 6 {
			request(ep, http.MethodGet, "/x", "X-Tenant-ID", "bob")
		}
		Expect(request(ep, http.MethodGet, "/x", "X-Tenant-ID", "bob").code).To(Equal(http.StatusTooManyRequests))
		read, err := sluice.StatusToken(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		write, err := sluice.WriteToken(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(write).To(HaveLen(43))
		Expect(write).NotTo(Equal(read))

		reset := ep.Admin + "/tenant?policy=admin&rule=all&tenant=bob"
		code, body := do(http.MethodDelete, reset, "Bearer "+read)
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring("write token"))
		Expect(request(ep, http.MethodGet, "/x", "X-Tenant-ID", "bob").code).To(Equal(http.StatusTooManyRequests), "the read token reset nothing")
		code, body = do(http.MethodDelete, reset, "Bearer "+write)
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(request(ep, http.MethodGet, "/x", "X-Tenant-ID", "bob").code).To(Equal(http.StatusOK))
		code, _ = get(ep.Admin+"/status", "Bearer "+write)
		Expect(code).To(Equal(http.StatusOK), "the write token reads too")

		pod, err := sluice.Kubectl(ctx, "get", "pod", "-n", ns, ep.Pod, "-o", "yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(pod).NotTo(ContainSubstring(write))
	})
})
