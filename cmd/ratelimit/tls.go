package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// tlsOptions are the gRPC listener's TLS files: none, a serving
// certificate, or one with the CA that signs the client certificates.
type tlsOptions struct {
	certFile, keyFile, clientCAFile string
	// clientSAN, when set, is a name a client certificate must carry
	// (envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN).
	clientSAN string
}

func (t tlsOptions) enabled() bool { return t.certFile != "" }

func (t tlsOptions) validate() error {
	switch {
	case (t.certFile == "") != (t.keyFile == ""):
		return errors.New("--tls-cert-file and --tls-key-file go together")
	case t.clientCAFile != "" && t.certFile == "":
		return errors.New("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	case t.clientSAN != "" && t.clientCAFile == "":
		return errors.New("--tls-client-san needs --tls-client-ca-file")
	}
	return nil
}

// serverConfig loads the files once, so a missing or bad file stops the
// start, and re-reads the certificate when its files change (a mounted
// Secret that cert-manager renews), at most once per recheck interval.
func (t tlsOptions) serverConfig() (*tls.Config, error) {
	kp := &keyPair{certFile: t.certFile, keyFile: t.keyFile}
	if _, err := kp.load(time.Now()); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.load(time.Now()) }}
	if t.clientCAFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(t.clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-client-ca-file %s holds no PEM certificate", t.clientCAFile)
	}
	cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	if san := t.clientSAN; san != "" {
		cfg.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) > 0 && hasSAN(chains[0][0], san) {
				return nil
			}
			return fmt.Errorf("client certificate does not name %q", san)
		}
	}
	return cfg, nil
}

// hasSAN reports whether c names san among its DNS names, IP addresses,
// URIs or email addresses.
func hasSAN(c *x509.Certificate, san string) bool {
	if slices.Contains(c.DNSNames, san) || slices.Contains(c.EmailAddresses, san) {
		return true
	}
	for _, ip := range c.IPAddresses {
		if ip.String() == san {
			return true
		}
	}
	for _, u := range c.URIs {
		if u.String() == san {
			return true
		}
	}
	return false
}

// keyRecheck is how often a handshake looks at the key pair's files.
const keyRecheck = 10 * time.Second

// keyPair is a serving certificate read from files, re-read when they
// change; a change that does not load keeps the last good pair.
type keyPair struct {
	certFile, keyFile string

	mu        sync.Mutex
	cert      *tls.Certificate
	modTimes  [2]time.Time
	checkedAt time.Time
}

func (k *keyPair) load(now time.Time) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && now.Sub(k.checkedAt) < keyRecheck {
		return k.cert, nil
	}
	k.checkedAt = now
	var mod [2]time.Time
	for i, f := range []string{k.certFile, k.keyFile} {
		if st, err := os.Stat(f); err == nil {
			mod[i] = st.ModTime()
		}
	}
	if k.cert != nil && mod == k.modTimes {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("--tls-cert-file %s, --tls-key-file %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.modTimes = &c, mod
	return k.cert, nil
}
