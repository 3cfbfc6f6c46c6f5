package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/policyfile"
)

// policyFileLoader reads --policy-file YAML as the API server would admit
// it (the CRD's schema, defaults and CEL rules) and compiles it with the
// controller's compiler. Outside a cluster there are no Secrets to check: a
// policy's spec.storage is taken as present, and its Redis URL is read from
// the environment variable the compiler names (SLUICE_REDIS_URL_<POLICY>).
// A policy that does not compile is an error: there is no earlier
// configuration to fall back on as the controller has.
func policyFileLoader(defaultNamespace string, paths []string) reload.LoadFunc {
	return func() (*config.Config, error) {
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
		return res.Config, nil
	}
}

// configSource is where the configuration comes from: the operator's
// compiled file, or policy files compiled in-process.
func configSource(o *options) *reload.Source {
	s := &reload.Source{ConfigPath: o.configPath, LabelsPath: o.labelsPath}
	if len(o.policyPaths) > 0 {
		s.Load, s.Files = policyFileLoader(o.podNS, o.policyPaths), o.policyPaths
	}
	return s
}
