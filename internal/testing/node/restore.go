package node

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// undo returns the host to s.Before: it ends what the run started (the
// tracked processes, then the shims and containers they left), unmounts
// everything under the run's directory, removes the kubepods cgroups, the
// KUBE-* chains, the bridge, restores the sysctls, removes what the run
// put in the default directories, and last the directory and the record.
// It is the same whether Close calls it or the next Start finds a stale
// record.
func (s *runState) undo() error {
	var errs []error
	stopTracked(s.Procs, 10*time.Second)
	errs = append(errs, s.killLeftovers()...)
	if err := unmountUnder(s.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(s.Before.Cgroups); err != nil {
		errs = append(errs, err)
	}
	if s.KubeProxy != "" {
		// kube-proxy knows every rule it makes, in each backend.
		_ = exec.Command(s.KubeProxy, "--cleanup", "--v=0").Run()
	}
	if err := removeKubeChains(s.Before.Chains); err != nil {
		errs = append(errs, err)
	}
	if err := removeEmptyTables(s.Before.Tables); err != nil {
		errs = append(errs, err)
	}
	if s.Bridge != "" && !slices.Contains(s.Before.Links, s.Bridge) {
		// The pods' veth ends first: the kernel removes a veth with its
		// network namespace, but does so asynchronously, so after the
		// containers are killed some may linger a moment.
		errs = append(errs, deletePorts(s.Bridge, s.Before.Links)...)
		waitVethsGone(s.Before.Links, 5*time.Second)
		if _, err := os.Stat(filepath.Join("/sys/class/net", s.Bridge)); err == nil {
			if out, err := exec.Command("ip", "link", "delete", s.Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip link delete %s: %w: %s", s.Bridge, err, out))
			}
		}
	}
	now, err := readSysctls(sortedKeys(s.Before.Sysctls))
	if err != nil {
		errs = append(errs, err)
	}
	for _, k := range sortedKeys(s.Before.Sysctls) {
		if now[k] != s.Before.Sysctls[k] {
			if err := writeSysctl(k, s.Before.Sysctls[k]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, s.cleanDefaultDirs()...)
	for _, d := range append([]string{s.Dir}, s.TempDirs...) {
		if err := removeUnmounted(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(statePath())
}

// killLeftovers kills what the tracked processes started and left behind:
// containerd's shims (they leave containerd's process tree, and name the
// run's socket on their command line) and the containers' processes (in the
// kubepods cgroups, which the run made). The kubepods cgroups are the
// run's only if they did not exist before it: Start refuses otherwise.
func (s *runState) killLeftovers() []error {
	var errs []error
	var shims []string
	for attempt := 0; ; attempt++ {
		var pids []int
		if s.Dir != "" {
			pids = append(pids, pidsNaming(s.Dir+"/")...)
		}
		if len(s.Before.Cgroups) == 0 {
			pids = append(pids, pidsInCgroups(kubepodsCgroups())...)
		}
		pids = slices.DeleteFunc(pids, func(pid int) bool { return pid == os.Getpid() })
		if len(pids) == 0 {
			return append(errs, removeShimSockets(shims)...)
		}
		for _, pid := range pids {
			if sock := shimSocket(pid); sock != "" && !slices.Contains(shims, sock) {
				shims = append(shims, sock)
			}
		}
		if attempt == 50 {
			return append(errs, fmt.Errorf("processes left by the run do not end: %v", pids))
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shimSocket is where the containerd shim pid listens: containerd 1.6
// puts every shim's socket in /run/containerd/s, named by the SHA-256 of
// its containerd's address, namespace and container id, whatever its
// configuration says. A shim killed with SIGKILL leaves it behind. "" if
// pid is no shim.
func shimSocket(pid int) string {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return ""
	}
	flags := map[string]string{}
	for i := 1; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags[strings.TrimLeft(args[i], "-")] = args[i+1]
		}
	}
	if flags["address"] == "" || flags["namespace"] == "" || flags["id"] == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Join(flags["address"], flags["namespace"], flags["id"])))
	return filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:]))
}

func removeShimSockets(sockets []string) []error {
	var errs []error
	for _, sock := range sockets {
		if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errs
}

// pidsNaming lists the live processes whose command line contains s.
func pidsNaming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // exited, or a zombie
		}
		if strings.Contains(string(cmdline), s) {
			out = append(out, pid)
		}
	}
	return out
}

// pidsInCgroups lists the processes in the cgroups under the given ones.
func pidsInCgroups(roots []string) []int {
	var out []int
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, walkErr error) error {
			if walkErr != nil || !d.IsDir() {
				return nil //nolint:nilerr // a cgroup that went while walking holds no process
			}
			data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil //nolint:nilerr // the cgroup went since the walk saw it
			}
			for f := range strings.FieldsSeq(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(out, pid) {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// unmountUnder unmounts every mount point under dir, deepest first (the
// kubelet's bind mount of its root directory, the pods' volumes, the
// containers' root filesystems, the network namespaces).
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	for attempt := 0; attempt < 5; attempt++ {
		mounts, err := mountPoints()
		if err != nil {
			return err
		}
		var under []string
		for _, m := range mounts {
			if m == dir || strings.HasPrefix(m, dir+"/") {
				under = append(under, m)
			}
		}
		if len(under) == 0 {
			return nil
		}
		sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
		for _, m := range under {
			if err := syscall.Unmount(m, 0); err != nil && attempt >= 2 {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if strings.HasPrefix(m, dir+"/") || m == dir {
			return fmt.Errorf("mount %s stays after unmounting", m)
		}
	}
	return nil
}

// removeCgroups removes the kubepods cgroups that were not there before,
// deepest first; a cgroup goes once its last process has.
func removeCgroups(before []string) error {
	var errs []string
	for attempt := 0; attempt < 50; attempt++ {
		errs = nil
		for _, root := range kubepodsCgroups() {
			if slices.Contains(before, root) {
				continue
			}
			var dirs []string
			_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			slices.Reverse(dirs) // children after their parent in a walk
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
					errs = append(errs, fmt.Sprintf("%s: %v", d, err))
				}
			}
		}
		if len(errs) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove kubepods cgroups: %s", strings.Join(errs, "; "))
}

// cleanDefaultDirs removes from the default directories what the run put
// there: the kubelet's links to its pod logs, libcni's cached results for
// the run's network, then each directory that was not there before and is
// now empty.
func (s *runState) cleanDefaultDirs() []error {
	var errs []error
	if entries, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, e := range entries {
			p := filepath.Join("/var/log/containers", e.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, s.Dir+"/") {
				if err := os.Remove(p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// libcni's results, for the run's network and for containerd's own
	// loopback one, name the sandbox's network namespace, which is under
	// the run's directory.
	for _, sub := range []string{"results", "cache/results"} {
		dir := filepath.Join("/var/lib/cni", sub)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			data, _ := os.ReadFile(p)
			if strings.HasPrefix(e.Name(), networkName+"-") || strings.Contains(string(data), s.Dir+"/") {
				if err := os.Remove(p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// containerd's shims listen in /run/containerd/s whatever the
	// configuration says, and a killed shim leaves its socket. With no
	// /run/containerd before the run, a socket nothing answers on is one
	// of the run's shims'.
	if !slices.Contains(s.Before.Dirs, "/run/containerd") {
		entries, _ := os.ReadDir("/run/containerd/s")
		for _, e := range entries {
			p := filepath.Join("/run/containerd/s", e.Name())
			if e.Type()&os.ModeSocket != 0 && !answers(p) {
				if err := os.Remove(p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// The kubelet's device plugin socket and checkpoint are always in
	// /var/lib/kubelet/device-plugins, whatever --root-dir says. With no
	// other kubelet on the host (Start checks), a /var/lib/kubelet that
	// was not there before is the run's.
	if !slices.Contains(s.Before.Dirs, "/var/lib/kubelet") && len(s.Before.Cgroups) == 0 {
		if err := removeUnmounted("/var/lib/kubelet"); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range defaultDirs {
		if slices.Contains(s.Before.Dirs, d) {
			continue
		}
		if _, err := os.Lstat(d); err != nil {
			continue
		}
		if err := removeEmptyTree(d); err != nil {
			errs = append(errs, fmt.Errorf("%s was made by the run and still holds %w", d, err))
		}
	}
	return errs
}

// removeEmptyTree removes dir if it holds nothing but empty directories.
func removeEmptyTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			return fmt.Errorf("%s", p)
		}
		if err := removeEmptyTree(p); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// removeUnmounted removes dir once nothing is mounted under
// it: with a mount left, removing could reach into what it shows (a host
// path volume).
func removeUnmounted(dir string) error {
	if dir == "" {
		return nil
	}
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			return fmt.Errorf("%s is left in place: %s is still mounted", dir, m)
		}
	}
	return os.RemoveAll(dir)
}

// answers reports whether something accepts connections on the unix
// socket.
func answers(socket string) bool {
	conn, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// deletePorts deletes the interfaces attached to bridge that keep lists
// not (the run's veths), ignoring those the kernel removed meanwhile.
func deletePorts(bridge string, keep []string) []error {
	ports, err := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	if err != nil {
		return nil // no bridge, or no ports
	}
	var errs []error
	for _, p := range ports {
		name := p.Name()
		if slices.Contains(keep, name) {
			continue
		}
		if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
			if _, statErr := os.Stat(filepath.Join("/sys/class/net", name)); statErr == nil {
				errs = append(errs, fmt.Errorf("ip link delete %s: %w: %s", name, err, out))
			}
		}
	}
	return errs
}

// waitVethsGone waits, up to d, until no veth the host did not have before
// (keep) is left: the ends of pod namespaces the kernel is still tearing
// down when they were not on the bridge any more.
func waitVethsGone(keep []string, d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		now, err := links()
		if err != nil || !slices.ContainsFunc(now, func(l string) bool {
			return strings.HasPrefix(l, "veth") && !slices.Contains(keep, l)
		}) {
			return
		}
	}
}
