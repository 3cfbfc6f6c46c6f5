package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The node's addresses. Pods live on a bridge the harness makes; the node,
// kube-apiserver and the kubelet listen on the bridge's address, and
// Service IPs are routed onto the bridge. Nothing leaves this machine.
const (
	// BridgeName is the pods' bridge.
	BridgeName = "sluice0"
	// NodeIP is the bridge's address: the pods' gateway, the node's
	// InternalIP and where kube-apiserver listens.
	NodeIP = "10.244.0.1"
	// PodCIDR holds every pod's IP.
	PodCIDR = "10.244.0.0/24"
	// ServiceCIDR holds every ClusterIP; the first one is the API's.
	ServiceCIDR = "10.96.0.0/24"
	// APIServiceIP is the ClusterIP of the default/kubernetes Service.
	APIServiceIP = "10.96.0.1"
	// NodeName is the node's name.
	NodeName = "sluice-node"
	// networkName names the CNI network (libcni's cache files start with it).
	networkName = "sluice-node"
)

// makeBridge creates the pods' bridge with the node's address and routes
// the Service range onto it, so that a ClusterIP is dialled from the node's
// address even before kube-proxy has a rule for it.
func makeBridge() error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", BridgeName)); err == nil {
		return fmt.Errorf("network interface %s exists: another node run, or a stale one without a record", BridgeName)
	}
	for _, args := range [][]string{
		{"link", "add", BridgeName, "type", "bridge"},
		{"addr", "add", NodeIP + "/24", "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
		{"route", "add", ServiceCIDR, "dev", BridgeName, "src", NodeIP},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	return nil
}

// cniConfig is the pods' network: the bridge plugin on the harness's
// bridge, addresses from host-local with its leases in the run's directory,
// no masquerading (nothing is routed off the machine).
func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, networkName, BridgeName, PodCIDR, NodeIP, ipamDir)
}

// cniBinDir is where Debian's containernetworking-plugins puts bridge,
// host-local and loopback.
func cniBinDir() (string, error) {
	for _, dir := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
		if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no CNI bridge plugin in /usr/lib/cni or /opt/cni/bin: hack/ensure-node.sh installs it")
}
