package main

import (
	"errors"
	"maps"
	"slices"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/compile"
)

// compilePolicies compiles --policy-file policies with the controller's
// compiler. Outside a cluster there are no Secrets to check: a policy's
// spec.storage is taken as present, and its Redis URL is read from the
// environment variable the compiler names (SLUICE_REDIS_URL_<POLICY>). A
// policy that does not compile is an error: there is no earlier
// configuration to fall back on as the controller has.
func compilePolicies(namespace string, policies []v1alpha1.RateLimitPolicy) (*config.Config, error) {
	secrets := map[string][]string{}
	for _, p := range policies {
		if s := p.Spec.Storage; s != nil {
			secrets[s.SecretRef.Name] = append(secrets[s.SecretRef.Name], s.SecretRef.Key)
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
		return nil, err
	}
	return res.Config, nil
}
