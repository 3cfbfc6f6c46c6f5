package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// containerd is the node's container runtime: Debian's containerd 1.6 with
// a configuration of its own, every path of it under dir.
type containerd struct {
	dir    string
	socket string
	proc   *process
}

// containerdConfig keeps containerd off the host's defaults (root, state,
// the opt plugin's /opt/containerd, runc's state) and fits it to this host:
// no AppArmor, no hugetlb controller, no OOM score below its own (it runs
// without CAP_SYS_RESOURCE), cgroupfs, network namespaces under its state.
func containerdConfig(dir, sandboxImage, cniBin string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  disable_apparmor = true
  disable_hugetlb_controller = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = %[7]q

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = %[8]q
  conf_dir = %[9]q
  max_conf_num = 1
`,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"),
		filepath.Join(dir, "containerd.sock"), filepath.Join(dir, "containerd.sock.ttrpc"),
		filepath.Join(dir, "opt"), sandboxImage, filepath.Join(dir, "runc"),
		cniBin, filepath.Join(dir, "net.d"))
}

func startContainerd(ctx context.Context, dir, sandboxImage string, state *runState) (*containerd, error) {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return nil, fmt.Errorf("containerd is not installed: hack/ensure-node.sh installs it")
	}
	cniBin, err := cniBinDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "net.d"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "net.d", "10-sluice-node.conflist"), []byte(cniConfig(filepath.Join(dir, "ipam"))), 0o644); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(containerdConfig(dir, sandboxImage, cniBin)), 0o644); err != nil {
		return nil, err
	}
	c := &containerd{dir: dir, socket: filepath.Join(dir, "containerd.sock")}
	if c.proc, err = startProcess("containerd", filepath.Join(dir, "containerd.log"), exec.Command(bin, "--config", config)); err != nil {
		return nil, err
	}
	if err := state.track("containerd", c.proc.pid()); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.ctr(ctx, "version"); err == nil {
			return c, nil
		}
		if !c.proc.running() || time.Now().After(deadline) {
			return nil, fmt.Errorf("containerd does not serve on %s:\n%s", c.socket, c.proc.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ctr runs ctr against this containerd in the CRI's namespace.
func (c *containerd) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.socket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// importImage loads an OCI or Docker archive into the CRI's image store, so
// that pods run it with imagePullPolicy Never (or IfNotPresent).
func (c *containerd) importImage(ctx context.Context, archive string) error {
	_, err := c.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", archive)
	return err
}

// stopTasks kills every container the runtime runs and waits until none
// runs, so that their mounts can go; the shims that remain are ended by
// the undo.
func (c *containerd) stopTasks(ctx context.Context) {
	out, err := c.ctr(ctx, "tasks", "list", "--quiet")
	if err != nil {
		return
	}
	for id := range strings.FieldsSeq(out) {
		_, _ = c.ctr(ctx, "tasks", "kill", "--all", "--signal", "SIGKILL", id)
	}
	for ctx.Err() == nil {
		out, err := c.ctr(ctx, "tasks", "list")
		if err != nil || !strings.Contains(out, "RUNNING") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
