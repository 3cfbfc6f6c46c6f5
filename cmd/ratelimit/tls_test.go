package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// authority signs test certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(t *testing.T) *authority {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cert, _ := x509.ParseCertificate(der)
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for names and its key, both PEM.
func (a *authority) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage, names ...string) (certPEM, keyPEM []byte) {
	g := NewWithT(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: names}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	g.Expect(err).NotTo(HaveOccurred())
	kder, err := x509.MarshalECPrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writePEM(t *testing.T, path string, data []byte) string {
	NewWithT(t).Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

// The gRPC port over TLS: a client presenting a certificate of the client
// CA (naming the required SAN) is served; one without a certificate, or
// naming another SAN, is refused during the handshake.
func TestTLSWithClientCertificates(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	serverCA, clientCA := newAuthority(t), newAuthority(t)
	cert, key := serverCA.issue(t, 2, x509.ExtKeyUsageServerAuth, "ratelimit.sluice-system.svc")
	o := tlsOptions{
		certFile:     writePEM(t, filepath.Join(dir, "tls.crt"), cert),
		keyFile:      writePEM(t, filepath.Join(dir, "tls.key"), key),
		clientCAFile: writePEM(t, filepath.Join(dir, "ca.crt"), clientCA.pem),
		clientSAN:    "istio-ingressgateway",
	}
	g.Expect(o.validate()).To(Succeed())
	cfg, err := o.serverConfig()
	g.Expect(err).NotTo(HaveOccurred())

	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	roots := x509.NewCertPool()
	roots.AddCert(serverCA.cert)
	check := func(clientCert ...[]byte) error {
		c := &tls.Config{RootCAs: roots, ServerName: "ratelimit.sluice-system.svc"}
		if len(clientCert) == 2 {
			pair, err := tls.X509KeyPair(clientCert[0], clientCert[1])
			g.Expect(err).NotTo(HaveOccurred())
			c.Certificates = []tls.Certificate{pair}
		}
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(c)))
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	gateway, gatewayKey := clientCA.issue(t, 3, x509.ExtKeyUsageClientAuth, "istio-ingressgateway")
	g.Expect(check(gateway, gatewayKey)).To(Succeed())
	g.Expect(check()).NotTo(Succeed(), "a client without a certificate was served")
	other, otherKey := clientCA.issue(t, 4, x509.ExtKeyUsageClientAuth, "some-pod")
	g.Expect(check(other, otherKey)).NotTo(Succeed(), "a client certificate without the SAN was accepted")
	stranger, strangerKey := serverCA.issue(t, 5, x509.ExtKeyUsageClientAuth, "istio-ingressgateway")
	g.Expect(check(stranger, strangerKey)).NotTo(Succeed(), "a client certificate of another CA was accepted")
}

// A renewed certificate (a Secret cert-manager rotates) is served without
// a restart; files that do not load keep the last good pair.
func TestTLSCertificateIsReRead(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	ca := newAuthority(t)
	cert, key := ca.issue(t, 2, x509.ExtKeyUsageServerAuth, "old")
	kp := &keyPair{certFile: writePEM(t, filepath.Join(dir, "tls.crt"), cert), keyFile: writePEM(t, filepath.Join(dir, "tls.key"), key)}
	now := time.Now()
	first, err := kp.load(now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Leaf.DNSNames).To(ConsistOf("old"))

	cert, key = ca.issue(t, 3, x509.ExtKeyUsageServerAuth, "new")
	writePEM(t, kp.certFile, cert)
	writePEM(t, kp.keyFile, key)
	later := time.Now().Add(time.Second)
	g.Expect(os.Chtimes(kp.certFile, later, later)).To(Succeed())
	g.Expect(os.Chtimes(kp.keyFile, later, later)).To(Succeed())
	same, _ := kp.load(now.Add(time.Second))
	g.Expect(same.Leaf.DNSNames).To(ConsistOf("old"), "re-read before the recheck interval")
	renewed, err := kp.load(now.Add(keyRecheck + time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed.Leaf.DNSNames).To(ConsistOf("new"))

	writePEM(t, kp.keyFile, []byte("not a key"))
	evenLater := later.Add(time.Second)
	g.Expect(os.Chtimes(kp.keyFile, evenLater, evenLater)).To(Succeed())
	kept, err := kp.load(now.Add(3 * keyRecheck))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept.Leaf.DNSNames).To(ConsistOf("new"))
}

func TestTLSFromERLEnvironment(t *testing.T) {
	g := NewWithT(t)
	env := map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/tls/tls.crt", "GRPC_SERVER_TLS_KEY": "/tls/tls.key",
		"GRPC_CLIENT_TLS_CACERT": "/ca/ca.crt", "GRPC_CLIENT_TLS_SAN": "gateway", "RUNTIME_ROOT": "/data"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.tls).To(Equal(tlsOptions{certFile: "/tls/tls.crt", keyFile: "/tls/tls.key", clientCAFile: "/ca/ca.crt", clientSAN: "gateway"}))

	env["GRPC_SERVER_USE_TLS"] = "false"
	o, _, err = parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.tls.enabled()).To(BeFalse())

	_, _, err = parseFlags([]string{"--tls-cert-file", "/a"}, func(string) (string, bool) { return "", false })
	g.Expect(err).To(MatchError(ContainSubstring("--tls-cert-file and --tls-key-file go together")))
	_, _, err = parseFlags(nil, func(k string) (string, bool) { return map[string]string{"GRPC_SERVER_USE_TLS": "true"}[k], true })
	g.Expect(err).To(MatchError(ContainSubstring("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT")))
}
