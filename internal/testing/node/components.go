package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// kubeletConfig fits the kubelet to this host (cgroup v1 with cgroupfs,
// swap allowed, containerd on its private socket) and to a test: a 10 s
// sync so that ConfigMap edits reach pods in seconds, image garbage
// collection and disk eviction off (the images cannot be pulled again),
// pod logs in the run's directory, its ports on the node's address and
// loopback only. The cluster has no DNS server, and the pods are not to
// ask the host's: their resolv.conf names their own loopback.
func kubeletConfig(dir, socket, caFile string, port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[4]q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[5]s
podLogsDir: %[6]q
resolvConf: %[7]q
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
`, NodeIP, port, healthzPort, caFile, socket, filepath.Join(dir, "pod-logs"), filepath.Join(dir, "resolv.conf"))
}

func (c *Cluster) startKubelet(ctx context.Context, bin string) error {
	dir := filepath.Join(c.Dir, "kubelet")
	if err := os.MkdirAll(filepath.Join(dir, "pod-logs"), 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.cp.kubeconfig(kubeconfig, "system:node:"+NodeName, "system:nodes"); err != nil {
		return err
	}
	port, err := freePort(NodeIP)
	if err != nil {
		return err
	}
	healthz, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(kubeletConfig(dir, c.runtime.socket, c.cp.pki.CAFile, port, healthz)), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin,
		"--config="+config,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(dir, "root"),
		"--cert-dir="+filepath.Join(dir, "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--v=2",
	)
	return c.startDaemon(ctx, "kubelet", cmd, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz))
}

// kubeProxyConfig is iptables mode that leaves the host's conntrack
// settings and route_localnet alone and opens NodePorts on the node's
// address only.
func kubeProxyConfig(kubeconfig string, healthz, metrics int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %[1]q}
mode: iptables
hostnameOverride: %[2]s
clusterCIDR: %[3]s
healthzBindAddress: 127.0.0.1:%[4]d
metricsBindAddress: 127.0.0.1:%[5]d
nodePortAddresses: [%[6]s/32]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
iptables:
  localhostNodePorts: false
  syncPeriod: 30s
  minSyncPeriod: 0s
`, kubeconfig, NodeName, PodCIDR, healthz, metrics, NodeIP)
}

func (c *Cluster) startKubeProxy(ctx context.Context, bin string) error {
	dir := filepath.Join(c.Dir, "kube-proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.cp.kubeconfig(kubeconfig, "system:kube-proxy"); err != nil {
		return err
	}
	healthz, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	metrics, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(kubeProxyConfig(kubeconfig, healthz, metrics)), 0o644); err != nil {
		return err
	}
	c.state.KubeProxy = bin
	cmd := exec.Command(bin, "--config="+config, "--v=2")
	return c.startDaemon(ctx, "kube-proxy", cmd, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz))
}

// startControllers starts kube-controller-manager (every default
// controller, service account tokens signed with the apiserver's key, CSRs
// signed by the cluster CA) and kube-scheduler.
func (c *Cluster) startControllers(ctx context.Context, cmBin, schedBin string) error {
	dir := filepath.Join(c.Dir, "controllers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmKubeconfig, schedKubeconfig := filepath.Join(dir, "controller-manager.kubeconfig"), filepath.Join(dir, "scheduler.kubeconfig")
	if err := c.cp.kubeconfig(cmKubeconfig, "system:kube-controller-manager"); err != nil {
		return err
	}
	if err := c.cp.kubeconfig(schedKubeconfig, "system:kube-scheduler"); err != nil {
		return err
	}
	cmPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	cm := exec.Command(cmBin,
		"--kubeconfig="+cmKubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cmPort),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.cp.pki.SAKeyFile,
		"--root-ca-file="+c.cp.pki.CAFile,
		"--cluster-signing-cert-file="+c.cp.pki.CAFile,
		"--cluster-signing-key-file="+c.cp.pki.CAKeyFile,
		"--service-cluster-ip-range="+ServiceCIDR,
		"--cluster-name="+NodeName,
		"--controllers=*",
		"--v=1",
	)
	if err := c.startDaemon(ctx, "kube-controller-manager", cm, fmt.Sprintf("https://127.0.0.1:%d/healthz", cmPort)); err != nil {
		return err
	}
	schedPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	sched := exec.Command(schedBin,
		"--kubeconfig="+schedKubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", schedPort),
		"--leader-elect=false",
		"--v=1",
	)
	return c.startDaemon(ctx, "kube-scheduler", sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort))
}

// startDaemon starts cmd, records it, and waits until healthz answers 200.
func (c *Cluster) startDaemon(ctx context.Context, name string, cmd *exec.Cmd, healthz string) error {
	p, err := startProcess(name, filepath.Join(c.Dir, name+".log"), cmd)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	if err := c.state.track(name, p.pid()); err != nil {
		return err
	}
	hc := &http.Client{
		Timeout: 2 * time.Second,
		// The daemons serve healthz with a self-signed certificate.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if resp, err := hc.Get(healthz); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.running() {
			return fmt.Errorf("%s exited:\n%s", name, p.logTail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not answer %s: %w\n%s", name, healthz, ctx.Err(), p.logTail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
