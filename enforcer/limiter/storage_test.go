package limiter

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

func TestNewClientTopologies(t *testing.T) {
	cases := []struct {
		url     string
		want    any // concrete client type, or nil for an error
		wantErr string
	}{
		{url: "redis://127.0.0.1:6379/0", want: &redis.Client{}},
		{url: "rediss://user:secret@redis.example:6380", want: &redis.Client{}},
		{url: "redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001", want: &redis.ClusterClient{}},
		{url: "rediss+cluster://127.0.0.1:7000", want: &redis.ClusterClient{}},
		{url: "redis+sentinel://127.0.0.1:26379?master_name=main", want: &redis.Client{}},
		{url: "redis+sentinel://127.0.0.1:26379", wantErr: "master_name is required"},
		{url: "http://127.0.0.1:6379", wantErr: `scheme "http" is not redis`},
		{url: "redis+ring://127.0.0.1:6379", wantErr: `unknown topology "ring"`},
		{url: "redis://127.0.0.1:6379?pool_sizes=3", wantErr: "pool_sizes"},
		{url: "redis://:hunter2@127.0.0.1:6379?bogus=1", wantErr: "xxxxx"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			g := NewWithT(t)
			client, err := NewClient(c.url, ClientOptions{})
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				g.Expect(err.Error()).NotTo(ContainSubstring("hunter2"), "passwords never reach messages")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			defer client.Close()
			g.Expect(client).To(BeAssignableToTypeOf(c.want))
		})
	}
}

func TestNewClientReachesEveryTopology(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			client, err := NewClient(url, ClientOptions{PoolSize: 4})
			g.Expect(err).NotTo(HaveOccurred())
			defer client.Close()
			g.Expect(client.Ping(context.Background()).Err()).To(Succeed())
		})
	}
}

// A Sentinel-managed Redis is found through the Sentinel, and decisions run
// on the primary it names.
func TestSentinelURLDecidesOnThePrimary(t *testing.T) {
	g := NewWithT(t)
	primary := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, primary, "main")
	r := newRedis(t, "redis+sentinel://"+sentinel.Addr()+"?master_name=main")
	req := Request{Bucket: bucketFor(t), Algorithm: FixedWindow, Cost: 1,
		Windows: []Window{{Requests: 2, Period: time.Hour}}}
	for _, want := range []bool{true, true, false} {
		d, err := r.Allow(context.Background(), req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Allowed).To(Equal(want))
	}
	// The counter lives on the primary.
	key := req.Bucket.Key(FixedWindow, time.Hour)
	g.Expect(primary.Client().HGet(context.Background(), key, "c").Val()).To(Equal("2"))
}

// rediss:// URLs speak TLS and verify the server's certificate.
func TestTLSURLVerifiesTheServer(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSignedCert(t, dir)
	srv := redistest.Start(t, redistest.WithTLS(certFile, keyFile))
	url := "rediss://" + srv.TLSAddr()

	client, err := NewClient(url, ClientOptions{RootCAs: pool})
	g.Expect(err).NotTo(HaveOccurred())
	r, err := NewRedis(client)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = r.Close(); _ = client.Close() }()
	d, err := r.Allow(context.Background(), Request{Bucket: bucketFor(t), Algorithm: TokenBucket, Cost: 1,
		Windows: []Window{{Requests: 5, Period: time.Minute}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Remaining).To(Equal(int64(4)))

	// Without the CA the certificate is not trusted, and nothing is decided.
	untrusting, err := NewClient(url, ClientOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer untrusting.Close()
	g.Expect(untrusting.Ping(context.Background()).Err()).To(MatchError(ContainSubstring("certificate")))
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key into dir.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
