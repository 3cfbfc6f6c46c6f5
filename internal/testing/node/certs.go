package node

import (
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
	"time"
)

// clusterCA signs kube-apiserver's serving certificate and, through
// kube-controller-manager, the certificates users ask for with a
// CertificateSigningRequest. It is the CA pods find in kube-root-ca.crt.
type clusterCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newClusterCA() (*clusterCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice-node-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &clusterCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// serving issues a serving certificate for the names and addresses.
func (ca *clusterCA) serving(dns []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// apiserverPKI is written where envtest's kube-apiserver looks for its
// certificates (it makes its own only when apiserver.crt is missing): the
// serving pair, valid for the Service IP pods dial, and the service account
// signing pair that kube-controller-manager shares.
type apiserverPKI struct {
	CAFile, CAKeyFile string
	// SAKeyFile signs service account tokens (the apiserver's
	// TokenRequest, kube-controller-manager's legacy token secrets).
	SAKeyFile string
}

func writeAPIServerPKI(dir string, ca *clusterCA, dns []string, ips []net.IP) (*apiserverPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cert, key, err := ca.serving(dns, ips)
	if err != nil {
		return nil, err
	}
	caKey, err := encodeKey(ca.key)
	if err != nil {
		return nil, err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKey, err := encodeKey(sa)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	p := &apiserverPKI{
		CAFile:    filepath.Join(dir, "cluster-ca.crt"),
		CAKeyFile: filepath.Join(dir, "cluster-ca.key"),
		SAKeyFile: filepath.Join(dir, "sa-signer.key"),
	}
	files := map[string][]byte{
		"apiserver.crt":  cert,
		"apiserver.key":  key,
		"cluster-ca.crt": ca.certPEM,
		"cluster-ca.key": caKey,
		// The names envtest passes as --service-account-key-file and
		// --service-account-signing-key-file.
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		"sa-signer.key": saKey,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// writeClientCert issues a client certificate for user in groups and
// writes it to dir/<name>.crt and .key.
func writeClientCert(ca *clusterCA, dir, name, user string, groups ...string) ([2]string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return [2]string{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return [2]string{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return [2]string{}, err
	}
	paths := [2]string{filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")}
	if err := os.WriteFile(paths[0], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return [2]string{}, err
	}
	return paths, os.WriteFile(paths[1], keyPEM, 0o600)
}
