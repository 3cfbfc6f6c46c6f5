package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/reload"
)

// compilerName is the program that compiles --policy-file: the CRD's
// schema, defaults and CEL rules, then the controller's compiler. It is a
// program of its own so that the sidecar, which reads the operator's
// compiled --config, does not link it: Go initialises every linked package,
// and the compiler's dependencies cost memory in every pod.
const compilerName = "sluice-policy-compile"

// compileTimeout bounds one run of the compiler, at start or on a change of
// the files.
const compileTimeout = 30 * time.Second

// findCompiler returns sluice-policy-compile beside this executable (as in
// the enforcer's image and make build's bin/), else on PATH.
func findCompiler() (string, error) {
	beside := "the directory of sluice-enforcer"
	if exe, err := os.Executable(); err == nil {
		beside = filepath.Dir(exe)
		path := filepath.Join(beside, compilerName)
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
			return path, nil
		}
	}
	path, err := exec.LookPath(compilerName)
	if err != nil {
		return "", fmt.Errorf("--policy-file needs %s, which is neither in %s nor on PATH: build it beside sluice-enforcer (make build, or go build ./cmd/policy-compile)", compilerName, beside)
	}
	return path, nil
}

// compilerLoader runs the compiler on the policy files and parses the
// configuration it prints. A refusal is the compiler's standard error, as
// it words it.
func compilerLoader(compiler, namespace string, paths []string) reload.LoadFunc {
	var args []string
	if namespace != "" {
		args = append(args, "--namespace", namespace)
	}
	args = append(append(args, "--"), paths...)
	return func() (*config.Config, error) {
		ctx, cancel := context.WithTimeout(context.Background(), compileTimeout)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, compiler, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = time.Second
		err := cmd.Run()
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s did not compile the policies within %s", compiler, compileTimeout)
		case err != nil:
			msg := strings.TrimPrefix(strings.TrimSpace(stderr.String()), compilerName+": ")
			if msg == "" {
				return nil, fmt.Errorf("%s: %w", compiler, err)
			}
			return nil, errors.New(msg)
		}
		c, err := config.Parse(stdout.Bytes())
		if err != nil {
			return nil, fmt.Errorf("configuration printed by %s: %w", compiler, err)
		}
		return c, nil
	}
}

// configSource is where the configuration comes from: the operator's
// compiled file, or policy files compiled by sluice-policy-compile.
func configSource(o *options) (*reload.Source, error) {
	s := &reload.Source{ConfigPath: o.configPath, LabelsPath: o.labelsPath}
	if len(o.policyPaths) > 0 {
		compiler, err := findCompiler()
		if err != nil {
			return nil, err
		}
		s.Load, s.Files = compilerLoader(compiler, o.podNS, o.policyPaths), o.policyPaths
	}
	return s, nil
}
