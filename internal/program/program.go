// Package program is what Sluice's long-running programs (sluice-enforcer,
// sluice-ratelimit) share around their own wiring: the signals that stop
// them, their exit statuses, and how a flag error, --help, --version, an
// invalid configuration or a failure to start ends them.
package program

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitRuntime = 1
	ExitUsage   = 2
	ExitConfig  = 3
)

// ErrUsage marks a flag error: the program ends with ExitUsage and points
// at --help.
var ErrUsage = errors.New("usage")

// ConfigError marks a configuration the program cannot run with: it ends
// with ExitConfig.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Run is a whole program: its arguments, environment and output in, its
// exit status out; tests call it as main does.
type Run func(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int

// Main runs run until SIGTERM or SIGINT cancels its context, and exits
// with its status.
func Main(run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	status := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// Program names a program in what it writes.
type Program struct {
	Name    string
	Version string
}

// Flags is the outcome of parsing a program's flags.
type Flags struct {
	Err     error
	Help    bool
	Version bool
	// Usage is the text --help prints.
	Usage func() string
}

// Parsed ends the program when its flags say so (an error, --help,
// --version), with the status to exit with; ok is false then.
func (p Program) Parsed(f Flags, stdout, stderr io.Writer) (status int, ok bool) {
	switch {
	case f.Err != nil:
		fmt.Fprintf(stderr, "%s: %s\nRun %s --help for the flags.\n", p.Name,
			strings.TrimPrefix(f.Err.Error(), ErrUsage.Error()+": "), p.Name)
		return ExitUsage, false
	case f.Help:
		fmt.Fprint(stdout, f.Usage())
		return ExitOK, false
	case f.Version:
		fmt.Fprintf(stdout, "%s %s\n", p.Name, p.Version)
		return ExitOK, false
	}
	return ExitOK, true
}

// Server is a started program.
type Server interface {
	// Serve runs until ctx ends (a clean stop) or the server fails.
	Serve(ctx context.Context) error
}

// Serve starts the program and serves until ctx ends: an invalid
// configuration ends it with ExitConfig, a failure to start or to serve
// with ExitRuntime, logged.
func (p Program) Serve(ctx context.Context, stderr io.Writer, log *slog.Logger, start func() (Server, error)) int {
	s, err := start()
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "%s: invalid configuration: %v\n", p.Name, ce.Err)
			return ExitConfig
		}
		log.Error("cannot start", "error", err)
		return ExitRuntime
	}
	if err := s.Serve(ctx); err != nil {
		log.Error("stopped", "error", err)
		return ExitRuntime
	}
	return ExitOK
}
