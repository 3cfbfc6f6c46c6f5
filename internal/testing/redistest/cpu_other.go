//go:build !linux

package redistest

import (
	"errors"
	"time"
)

// LimitCPU caps the server's CPU on Linux only.
func (s *Server) LimitCPU(float64) error {
	return errors.New("redistest: LimitCPU needs Linux cgroups")
}

func (s *Server) removeCgroup() {}

// CPUTime reads the scheduler's account on Linux only.
func (s *Server) CPUTime() (time.Duration, error) {
	return 0, errors.New("redistest: CPUTime needs Linux")
}
