package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroupRoot is where the machine mounts its cgroups: the unified
// hierarchy (cgroup v2) at the root, or the v1 cpu controller in cpu/.
const cgroupRoot = "/sys/fs/cgroup"

// LimitCPU caps the running server at fraction of one CPU (0.2: 2 ms of
// CPU time in every 10 ms) by moving it into a cgroup of its own, so that
// a benchmark can make Redis the bottleneck on a machine whose cores the
// callers share: with each server capped alike, what a topology carries
// grows with its servers and not with the machine. The cap holds until the
// process ends (Restart starts one without it); Close removes the cgroup.
// It needs root and a cpu controller (cgroup v1 or v2), and says why not
// otherwise.
func (s *Server) LimitCPU(fraction float64) error {
	if fraction <= 0 || fraction > 64 {
		return fmt.Errorf("redistest: CPU fraction %v out of range", fraction)
	}
	pid := s.pid()
	if pid == 0 {
		return errors.New("redistest: LimitCPU of a stopped server")
	}
	// Short periods throttle for short spells (not most of the default
	// 100 ms at a time); the kernel takes no quota under 1 ms.
	period, quota := 10_000, int(fraction*10_000) // µs
	if quota < 1000 {
		period, quota = int(1000/fraction), 1000
	}
	name := fmt.Sprintf("redistest-%d-%d", os.Getpid(), s.port)

	var dir string
	var files [][2]string // file, value, written in order
	if controllers, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		if !strings.Contains(" "+strings.TrimSpace(string(controllers))+" ", " cpu ") {
			return errors.New("redistest: the cgroup v2 hierarchy has no cpu controller")
		}
		// The controller must be enabled for the root's children.
		if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			return fmt.Errorf("redistest: enable the cpu controller: %w", err)
		}
		dir = filepath.Join(cgroupRoot, name)
		files = [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, period)}}
	} else {
		dir = filepath.Join(cgroupRoot, "cpu", name)
		files = [][2]string{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", strconv.Itoa(quota)}}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("redistest: make a cgroup (root is needed): %w", err)
	}
	files = append(files, [2]string{"cgroup.procs", strconv.Itoa(pid)})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0); err != nil {
			_ = os.Remove(dir)
			return fmt.Errorf("redistest: write %s of %s: %w", f[0], dir, err)
		}
	}
	s.mu.Lock()
	s.cgroup = dir
	s.mu.Unlock()
	return nil
}

// removeCgroup removes the server's cgroup, once its process is gone.
func (s *Server) removeCgroup() {
	if s.cgroup != "" {
		_ = os.Remove(s.cgroup)
		s.cgroup = ""
	}
}

// CPUTime is the CPU time the running server has used so far, as the
// scheduler counts it (/proc/PID/schedstat, in ns): all of its work, where
// INFO commandstats times commands alone and counts a throttled spell in
// the middle of one as its time.
func (s *Server) CPUTime() (time.Duration, error) {
	pid := s.pid()
	if pid == 0 {
		return 0, errors.New("redistest: CPUTime of a stopped server")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, fmt.Errorf("redistest: %w", err)
	}
	ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redistest: schedstat of %d: %w", pid, err)
	}
	return time.Duration(ns), nil
}
