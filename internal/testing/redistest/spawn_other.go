//go:build !linux

package redistest

import "os/exec"

// Without Pdeathsig, servers are only stopped by Cleanup and Close; a test
// binary that is killed leaves its servers running.
func startProcess(cmd *exec.Cmd) error {
	return cmd.Start()
}
