// Command sluice-policy-compile reads RateLimitPolicy YAML files, admits
// them as the API server would (the CRD's schema, defaults and CEL rules)
// and compiles them with the controller's compiler. It prints the compiled
// enforcer configuration (the JSON sluice-enforcer --config reads) on
// standard output, or every problem on standard error.
//
// sluice-enforcer runs it for --policy-file, at start and at each change of
// the files, so that the sidecar does not link the compiler and its
// dependencies, whose initialisation costs memory in every pod.
package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/policyfile"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version, or "devel".
var version = ""

func buildVersion() string { return buildinfo.Version(version) }

// Exit statuses.
const (
	exitOK      = 0
	exitRefused = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sluice-policy-compile", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	namespace := fs.String("namespace", "", `namespace of the policies that name none (default "default")`)
	showVersion := fs.Bool("version", false, "print the version and exit")
	help := fs.BoolP("help", "h", false, "print this help and exit")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "sluice-policy-compile: %v\nRun sluice-policy-compile --help for the flags.\n", err)
		return exitUsage
	}
	switch {
	case *help:
		fmt.Fprint(stdout, usage(fs))
		return exitOK
	case *showVersion:
		fmt.Fprintf(stdout, "sluice-policy-compile %s\n", buildVersion())
		return exitOK
	case fs.NArg() == 0:
		fmt.Fprint(stderr, "sluice-policy-compile: no policy file given\nRun sluice-policy-compile --help for the flags.\n")
		return exitUsage
	}
	data, err := compileFiles(*namespace, fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "sluice-policy-compile: %v\n", err)
		return exitRefused
	}
	if _, err := stdout.Write(append(data, '\n')); err != nil {
		fmt.Fprintf(stderr, "sluice-policy-compile: write the configuration: %v\n", err)
		return exitRefused
	}
	return exitOK
}

// compileFiles reads the policy files as the API server would admit them
// and compiles them with the controller's compiler. Outside a cluster there
// are no Secrets to check: a policy's spec.storage is taken as present, and
// its Redis URL is read by the enforcer from the environment variable the
// compiler names (SLUICE_REDIS_URL_<POLICY>). A policy that does not
// compile is an error: there is no earlier configuration to fall back on as
// the controller has.
func compileFiles(defaultNamespace string, paths []string) ([]byte, error) {
	namespace, policies, err := policyfile.Load(defaultNamespace, paths...)
	if err != nil {
		return nil, err
	}
	secrets := map[string][]string{}
	for _, p := range policies {
		if ref := p.Spec.StorageSecret(); ref != nil {
			secrets[ref.Name] = append(secrets[ref.Name], ref.Key)
		}
	}
	res, err := compile.Namespace(namespace, policies, compile.Options{Secrets: secrets})
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(res.Errors)) {
		errs = append(errs, res.Errors[name])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("compile policies: %w", err)
	}
	// The compiler's output is the same contract as the operator's
	// ConfigMap: hold it to the same validation.
	if err := res.Config.Validate(); err != nil {
		return nil, fmt.Errorf("compiled policies: %w", err)
	}
	return res.JSON, nil
}

// usage is the --help text.
func usage(fs *pflag.FlagSet) string {
	return `sluice-policy-compile: compile RateLimitPolicy YAML for sluice-enforcer.

It admits the policies as the API server would (the CRD's schema, defaults
and CEL rules), compiles them as the operator does, and prints the
configuration sluice-enforcer --config reads. sluice-enforcer --policy-file
runs it, found beside sluice-enforcer or on PATH (the enforcer's image holds
both).

Usage:
  sluice-policy-compile [--namespace NS] FILE|FOLDER... > config.json

A FOLDER is its .yaml, .yml and .json files (not its subfolders), as
kubectl apply -f reads one; a kustomization.yaml in it is skipped.

Flags:
` + fs.FlagUsages() + `
Exit status: 0 with the configuration on standard output, 1 when a policy is
refused (every problem on standard error), 2 on a command line error.
`
}
