// Package node runs a real single-node Kubernetes on this machine for the
// real-node tier (test/node): etcd and kube-apiserver (controller-runtime
// envtest, from make envtest), kube-controller-manager, kube-scheduler, the
// kubelet and kube-proxy (hack/envtest.sh node, into bin/node), and
// containerd with runc and the CNI bridge plugin from Debian. Pods are real
// containers from images imported into containerd (no registry): the
// archives in bin/images/ and two the harness builds FROM scratch itself
// (PauseImage when no bin/images/pause.tar or *-pause.tar is there, and
// HelloImage).
//
//	c, err := node.Start(ctx, node.Options{Progress: os.Stderr})
//	if err != nil { ... }
//	defer c.Close()
//
// It needs root (hack/ensure-node.sh installs containerd, runc, the CNI
// plugins, iptables, conntrack and nft from Debian), and one run at a time
// per host (a lock in /run/sluice-node). After a run killed before Close,
// the next Start undoes it first; go run ./hack/node-undo does it at once.
//
// # Network
//
// The harness makes a bridge, sluice0, with 10.244.0.1/24: the node's
// InternalIP, the pods' gateway and kube-apiserver's address. Pods get
// 10.244.0.2 and up (host-local); ClusterIPs are 10.96.0.0/24, routed onto
// the bridge, 10.96.0.1 being the API's (its serving certificate holds that
// IP, so in-cluster clients verify it). No masquerading: nothing leaves the
// machine, and tests send traffic only to loopback and the bridge.
//
// # What a run changes on the host, and how it is undone
//
// Before the first change Start writes a record, /run/sluice-node/run.json:
// the host state it found (Snapshot: sysctls, KUBE-* chains, mounts,
// kubepods cgroups, default directories, network interfaces), the run's
// directory and every process it starts (pid and start time). Close undoes
// the run from that record, and so does the next Start when a run died
// without Close (a crash, SIGKILL, a timed-out test binary):
//
//   - processes: etcd, kube-apiserver, containerd, kube-controller-manager,
//     kube-scheduler, the kubelet and kube-proxy are stopped by pid (SIGTERM,
//     then SIGKILL), the containers first through containerd; containerd's
//     shims (which name the run's socket) and the containers' processes (in
//     the kubepods cgroups, which did not exist before: Start refuses to run
//     otherwise) are killed by pid. The daemons also die with the harness's
//     process (Pdeathsig).
//   - sysctls: the kubelet sets vm.overcommit_memory=1, vm.panic_on_oom=0,
//     kernel.panic=10, kernel.panic_on_oops=1 and the kernel keyring
//     limits; the CNI bridge plugin sets net.ipv4.ip_forward=1. Each is
//     written back to the value it had. kube-proxy is configured to leave
//     conntrack and route_localnet alone; they are checked all the same.
//   - iptables: kube-proxy's and the kubelet's KUBE-* chains (nat, filter,
//     mangle; IPv4 and IPv6) are removed with kube-proxy --cleanup, then
//     any KUBE-* chain that was not there before is deleted with the rules
//     jumping to it.
//   - mounts: the kubelet's bind mount of its root directory, the pods'
//     volumes (tmpfs), the containers' root filesystems (overlay) and
//     /dev/shm, the network namespaces: all are under the run's directory
//     and unmounted deepest first.
//   - cgroups: kubepods, kubepods/burstable, kubepods/besteffort and the
//     pods' cgroups in every hierarchy are removed, deepest first.
//   - network: the bridge sluice0 is deleted (with its address and the
//     Service route); the pods' veth pairs went with their namespaces.
//   - default directories: whatever the configuration says, the kubelet
//     links container logs in /var/log/containers and keeps its device
//     plugin socket in /var/lib/kubelet/device-plugins, libcni caches
//     results in /var/lib/cni (for the run's network and containerd's
//     loopback one), and the shims put sockets in /run/containerd/s (left
//     behind by a shim killed with SIGKILL). The harness removes its own
//     entries (the links into its directory, the results naming its
//     network namespaces, the sockets of the shims it killed, computed from
//     their command lines) and then each of those directories that did not
//     exist before and is empty; /var/lib/kubelet, when it did not exist,
//     is the run's kubelet's and goes whole.
//   - nftables: iptables-nft makes the ip and ip6 filter, nat and mangle
//     tables, with their built-in chains, the first time kube-proxy or the
//     kubelet touches them; a table that was not there before and holds no
//     rule is deleted (nft delete table).
//   - envtest's temporary directory for the webhook's certificates, when
//     Options.WebhookDirs is set, is removed.
//   - the run's directory (every config, containerd's root and state, the
//     kubelet's root, etcd's data, the logs) is removed, once nothing is
//     mounted under it; then the record.
//
// The lock file /run/sluice-node/lock stays (it is on a tmpfs, and
// removing a lock others may wait on would let two runs in at once).
//
// # Timings on this machine (2 cores, measured 2026-12-01)
//
// Building the four binaries (hack/envtest.sh node, nice -n 19): 6 min 18 s
// the first time with kube-apiserver's packages already in the Go build
// cache (kubelet 261 s, kube-proxy 24 s, kube-controller-manager 79 s,
// kube-scheduler 14 s); 0.1 s when the stamps are current.
//
// Start takes 9 to 12 s: etcd and kube-apiserver 3 to 5 s, building the
// two images 1 s, containerd and importing the images 0.5 to 4 s (nine
// archives with make node-images'), kube-controller-manager and
// kube-scheduler 0.5 s, the kubelet until the node is Ready 1 s, kube-proxy
// 0.6 s. A Deployment's two pods are Available 5 s after it is created; a
// new Service routes within 3 s. Close takes 2.5 to 5 s: killing the
// containers 0.3 s, kube-apiserver and etcd 1.1 s, the undo 1 to 1.3 s.
// Undoing a killed run at the next Start takes 0.2 s. Cluster.Timings has
// each step of a run.
package node
