package node

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/proc"
)

// controlPlane is etcd and kube-apiserver as envtest starts them, made a
// real cluster's: the apiserver listens on the node's address (pods reach
// it through the kubernetes Service), serves a certificate valid for that
// Service's IP, runs the ServiceAccount and NodeRestriction admission
// plugins and the Node authorizer, and shares its service account key with
// kube-controller-manager.
type controlPlane struct {
	env    *envtest.Environment
	config *rest.Config
	pki    *apiserverPKI
	// kubeletClient is the apiserver's client certificate for the kubelet
	// (logs, exec), from the cluster CA the kubelet trusts.
	kubeletClient [2]string
}

func startControlPlane(dir, assets string, crdDirs, webhookDirs []string, state *runState) (*controlPlane, error) {
	ca, err := newClusterCA()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "apiserver")
	pki, err := writeAPIServerPKI(certDir, ca,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP(NodeIP), net.ParseIP(APIServiceIP), net.ParseIP("127.0.0.1")})
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{pki: pki}
	if cp.kubeletClient, err = writeClientCert(ca, certDir, "kubelet-client", "kube-apiserver-kubelet-client", "system:masters"); err != nil {
		return nil, err
	}
	port, err := freePort(NodeIP)
	if err != nil {
		return nil, err
	}
	api := &envtest.APIServer{CertDir: certDir, StartTimeout: time.Minute, StopTimeout: 30 * time.Second}
	api.SecureServing.Address, api.SecureServing.Port = NodeIP, strconv.Itoa(port)
	api.SecureServing.CA = ca.certPEM
	args := api.Configure()
	args.Set("advertise-address", NodeIP)
	args.Set("service-cluster-ip-range", ServiceCIDR)
	args.Set("authorization-mode", "Node,RBAC")
	// envtest turns ServiceAccount admission off (it runs no
	// kube-controller-manager); a real cluster has it.
	args.Disable("disable-admission-plugins")
	args.Set("enable-admission-plugins", "NodeRestriction")
	args.Set("kubelet-client-certificate", cp.kubeletClient[0])
	args.Set("kubelet-client-key", cp.kubeletClient[1])
	args.Set("kubelet-preferred-address-types", "InternalIP")

	cp.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: len(crdDirs) > 0,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: webhookDirs},
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")},
		},
	}
	cfg, err := cp.env.Start()
	// envtest does not tell the pids: find them among our children, to be
	// stopped by the next Start should this process die before Close.
	for _, name := range []string{"etcd", "kube-apiserver"} {
		pids, _ := proc.ChildPids(name)
		for _, pid := range pids {
			if terr := state.track(name, pid); terr != nil && err == nil {
				err = terr
			}
		}
	}
	// envtest writes the webhook's certificates to a temporary directory of
	// its own, which a killed run would leave.
	if certs := cp.env.WebhookInstallOptions.LocalServingCertDir; certs != "" {
		state.TempDirs = append(state.TempDirs, certs)
		if serr := state.save(); serr != nil && err == nil {
			err = serr
		}
	}
	if err != nil {
		_ = cp.env.Stop()
		return nil, fmt.Errorf("start etcd and kube-apiserver from %s (make envtest builds them): %w", assets, err)
	}
	cp.config = cfg
	return cp, nil
}

// kubeconfig writes a kubeconfig for the user to path.
func (cp *controlPlane) kubeconfig(path, user string, groups ...string) error {
	u, err := cp.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func (cp *controlPlane) stop() {
	if cp != nil && cp.env != nil {
		_ = cp.env.Stop()
	}
}

// freePort is a TCP port free on ip.
func freePort(ip string) (int, error) {
	ports, err := freeport.On([]string{ip}, 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}
