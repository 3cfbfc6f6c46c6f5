package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// stateDir holds the record of the run in progress. It is on /run, a tmpfs:
// a reboot clears it together with everything it describes (processes,
// mounts, cgroups, iptables rules, sysctls).
const stateDir = "/run/sluice-node"

// runState is what a run changed and how to undo it, written before each
// change, so that the next Start can undo a run that died without Close.
type runState struct {
	// Dir is the run's directory: every config, socket, state and log.
	Dir string `json:"dir"`
	// Bridge is the pods' bridge, made by the harness.
	Bridge string `json:"bridge"`
	// KubeProxy is the kube-proxy binary, whose --cleanup removes its
	// rules.
	KubeProxy string `json:"kubeProxy,omitempty"`
	// TempDirs are directories outside Dir that the run made.
	TempDirs []string `json:"tempDirs,omitempty"`
	// Before is the host as it was.
	Before HostState `json:"before"`
	// Procs are the processes the harness started, in start order.
	Procs []trackedProc `json:"procs"`
}

// trackedProc names a process by pid and start time, so that a pid reused
// by another process after a crash is never signalled.
type trackedProc struct {
	Name  string `json:"name"`
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
}

func statePath() string { return filepath.Join(stateDir, "run.json") }

func (s *runState) save() error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath())
}

func loadState() (*runState, error) {
	data, err := os.ReadFile(statePath())
	if err != nil {
		return nil, err
	}
	var s runState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(), err)
	}
	return &s, nil
}

func (s *runState) track(name string, pid int) error {
	start, err := procStartTime(pid)
	if err != nil {
		return err
	}
	s.Procs = append(s.Procs, trackedProc{Name: name, Pid: pid, Start: start})
	return s.save()
}

// procStartTime is field 22 of /proc/<pid>/stat: when the process started,
// in clock ticks since boot.
func procStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 20 {
		return 0, errors.New("malformed /proc stat")
	}
	var start uint64
	_, err = fmt.Sscan(fields[19], &start)
	return start, err
}

// alive reports whether p is still the process that was tracked and has
// not exited (a zombie has).
func (p trackedProc) alive() bool {
	start, err := procStartTime(p.Pid)
	if err != nil || start != p.Start {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return false
	}
	s := string(data)
	return !strings.HasPrefix(s[strings.LastIndexByte(s, ')')+2:], "Z")
}

// stopTracked sends SIGTERM to each live tracked process, newest first,
// then SIGKILL to those still running after grace.
func stopTracked(procs []trackedProc, grace time.Duration) {
	live := slices.Clone(procs)
	slices.Reverse(live)
	for _, p := range live {
		if p.alive() {
			_ = syscall.Kill(p.Pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(grace)
	for {
		live = slices.DeleteFunc(live, func(p trackedProc) bool { return !p.alive() })
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range live {
				_ = syscall.Kill(p.Pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
