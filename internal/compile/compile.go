/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package compile turns the RateLimitPolicies of a namespace into the
// enforcer configuration (schema sluice.dev/enforcer-config/v1). It is pure:
// what it needs to know about the cluster (selected pods, Secrets, the
// configuration published so far) comes in Options, so the same input always
// yields the same bytes.
package compile

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// MaxConfigBytes is the most one ConfigMap holds, its keys and values
// together: the API server refuses a larger one.
const MaxConfigBytes = 1 << 20

// keyAllowance is room left in MaxConfigBytes for the key the
// configuration is stored under (config.json.gz).
const keyAllowance = 64

// CompressAbove is the size of JSON above which the configuration is
// stored gzip-compressed (Result.Compressed): past a quarter of the
// ConfigMap limit, where it would be the watch traffic of every node with
// an enforcer at each change. Smaller ones stay plain JSON, readable with
// kubectl and by enforcers of releases that read no compressed file.
const CompressAbove = 256 << 10

// Options are the facts about the cluster that compiling a namespace needs.
type Options struct {
	// Replicas is how many running pods each policy selects, by policy name
	// (for a rateLimitService policy, how many pods the rate limit service
	// runs). Under LocalFallback every one admits its share of each limit.
	Replicas map[string]int32
	// Secrets lists the data keys of every existing Secret of the namespace
	// that a policy's spec.storage names, by Secret name.
	Secrets map[string][]string
	// KeySets holds the data of every Secret and ConfigMap key that a
	// policy's jwtClaim keys name, when it exists.
	KeySets map[KeySetRef][]byte
	// Previous is the configuration published so far, if any. A policy that
	// no longer compiles keeps its entry from it (matched by UID), so a bad
	// edit never lifts the limits the enforcers apply.
	Previous *config.Config
	// DefaultFailureMode applies to policies whose spec.failureMode is empty;
	// when it is empty too, v1alpha1.DefaultFailureMode applies.
	DefaultFailureMode v1alpha1.FailureMode
}

// Result is the compiled configuration of a namespace.
type Result struct {
	// Config holds every policy that compiled, and the previous entry of each
	// that did not and had one, sorted by name.
	Config *config.Config
	// JSON is Config encoded: the same input always yields the same bytes.
	JSON []byte
	// Compressed is JSON gzip-compressed (config.Compress) when JSON is
	// larger than CompressAbove, nil otherwise: the form it is stored in.
	Compressed []byte
	// Hash is Config.Hash(), what enforcers report on /status.
	Hash string
	// Errors says, by policy name, why a policy did not compile.
	Errors map[string]*PolicyError
}

// PolicyError says why one policy cannot be compiled as written.
type PolicyError struct {
	// Policy is the name of the policy.
	Policy string
	// Reason is the Accepted condition's reason, a v1alpha1.Reason* constant.
	Reason string
	// Message tells the user what to change.
	Message string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("policy %s: %s", e.Policy, e.Message)
}

// TooLargeError says the namespace's configuration does not fit a
// ConfigMap even compressed, or is larger than enforcers read.
type TooLargeError struct {
	Namespace string
	// Size is the JSON's; Compressed the gzip's, 0 when not compressed.
	Size, Compressed int
}

func (e *TooLargeError) Error() string {
	const fix = "move some policies to other namespaces, or use fewer rules and overrides"
	if e.Size > config.MaxDocumentBytes {
		return fmt.Sprintf("the compiled configuration of namespace %s is %d bytes of JSON, more than the %d enforcers read: %s",
			e.Namespace, e.Size, config.MaxDocumentBytes, fix)
	}
	return fmt.Sprintf("the compiled configuration of namespace %s is %d bytes compressed (%d of JSON), more than the %d a ConfigMap holds: %s",
		e.Namespace, e.Compressed, e.Size, MaxConfigBytes, fix)
}

// Namespace compiles the enforcer sidecar policies of one namespace (those
// with a selector) into the configuration of ConfigMap
// sluice-enforcer-config; the rateLimitService policies are Service's.
// Policies that cannot be compiled are reported in Result.Errors and do
// not stop the others. The error is a *TooLargeError when the result does
// not fit a ConfigMap; the Result is complete all the same.
func Namespace(namespace string, policies []v1alpha1.RateLimitPolicy, opts Options) (*Result, error) {
	sidecar := slices.DeleteFunc(slices.Clone(policies), IsRateLimitService)
	return compileSet(namespace, sidecar, opts, nil, func(prev *config.Policy, _ *v1alpha1.RateLimitPolicy) bool {
		return prev.Domain == ""
	})
}

// IsRateLimitService reports whether p is a policy of the rate limit
// service (spec.rateLimitService), not of enforcer sidecars.
func IsRateLimitService(p v1alpha1.RateLimitPolicy) bool { return p.Spec.RateLimitService != nil }

// compileSet compiles policies into one configuration. A policy refused
// has its error and no entry; a policy that does not compile keeps its
// previous entry when keep allows it.
func compileSet(namespace string, policies []v1alpha1.RateLimitPolicy, opts Options,
	refused map[string]*PolicyError, keep func(prev *config.Policy, p *v1alpha1.RateLimitPolicy) bool) (*Result, error) {
	sorted := slices.Clone(policies)
	slices.SortFunc(sorted, func(a, b v1alpha1.RateLimitPolicy) int { return strings.Compare(a.Name, b.Name) })

	res := &Result{
		Config: &config.Config{Schema: config.Schema, Namespace: namespace, Policies: []config.Policy{}},
		Errors: map[string]*PolicyError{},
	}
	redisEnvs := map[string]string{} // env var -> policy using it
	for i := range sorted {
		p := &sorted[i]
		if pe := refused[p.Name]; pe != nil {
			res.Errors[p.Name] = pe
			continue
		}
		compiled, err := Policy(p, opts)
		if err == nil && compiled.RedisURLEnv != "" {
			if other, taken := redisEnvs[compiled.RedisURLEnv]; taken {
				err = &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
					"its storage environment variable %s is also policy %s's: rename one of the two policies", compiled.RedisURLEnv, other)}
			}
		}
		if err != nil {
			res.Errors[p.Name] = asPolicyError(p.Name, err)
			if prev, ok := opts.Previous.Entry(p.Name, string(p.UID)); ok && keep(prev, p) {
				kept := *prev // a copy: the previous configuration stays as it was
				kept.Replicas = opts.Replicas[p.Name]
				res.Config.Policies = append(res.Config.Policies, kept)
			}
			continue
		}
		if compiled.RedisURLEnv != "" {
			redisEnvs[compiled.RedisURLEnv] = p.Name
		}
		res.Config.Policies = append(res.Config.Policies, compiled)
	}

	data, err := json.Marshal(res.Config)
	if err != nil {
		return nil, fmt.Errorf("encode the configuration of namespace %s: %w", namespace, err)
	}
	res.JSON = data
	res.Hash = config.HashJSON(data)
	return res, encode(namespace, res)
}

// encode compresses a large configuration and says whether it fits: a
// ConfigMap, compressed, and what enforcers read once inflated.
func encode(namespace string, res *Result) error {
	if len(res.JSON) <= CompressAbove {
		return nil
	}
	if len(res.JSON) > config.MaxDocumentBytes {
		return &TooLargeError{Namespace: namespace, Size: len(res.JSON)}
	}
	res.Compressed = config.Compress(res.JSON)
	if len(res.Compressed) > MaxConfigBytes-keyAllowance {
		return &TooLargeError{Namespace: namespace, Size: len(res.JSON), Compressed: len(res.Compressed)}
	}
	return nil
}

// Policy compiles one policy. The error is a *PolicyError.
func Policy(p *v1alpha1.RateLimitPolicy, opts Options) (config.Policy, error) {
	spec := p.Spec.DeepCopy()
	if spec.FailureMode == "" {
		spec.FailureMode = cmp.Or(opts.DefaultFailureMode, v1alpha1.DefaultFailureMode)
	}
	spec.ApplyDefaults()

	if err := checkStorage(p, spec.Storage, opts.Secrets); err != nil {
		return config.Policy{}, err
	}
	if err := checkOverrides(p, spec); err != nil {
		return config.Policy{}, err
	}
	verify, err := jwtVerifications(p, spec, opts.KeySets)
	if err != nil {
		return config.Policy{}, err
	}
	compiled := policy(p, spec, opts.Replicas[p.Name], verify)

	// The CRD's rules catch what they can at admission; this catches what only
	// the resolved limits show (a tier's limits, an override, the cost).
	if errs := compiled.Problems("spec"); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		return config.Policy{}, &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonInvalidSpec,
			Message: "the spec cannot be enforced as written: " + strings.Join(msgs, "; ")}
	}
	return compiled, nil
}

func checkStorage(p *v1alpha1.RateLimitPolicy, storage *v1alpha1.Storage, secrets map[string][]string) error {
	if storage == nil || storage.SecretRef == nil {
		return nil
	}
	ref := storage.SecretRef
	keys, exists := secrets[ref.Name]
	switch {
	case !exists:
		return &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonStorageSecretMissing, Message: fmt.Sprintf(
			"Secret %s named in spec.storage.secretRef does not exist in namespace %s: create it with the Redis URL under key %s, "+
				"for example kubectl create secret generic %s -n %s --from-literal=%s=redis://host:6379",
			ref.Name, p.Namespace, ref.Key, ref.Name, p.Namespace, ref.Key)}
	case !slices.Contains(keys, ref.Key):
		return &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonStorageSecretMissing, Message: fmt.Sprintf(
			"Secret %s has no key %s: add the Redis URL under key %s, or set spec.storage.secretRef.key to the key that holds it",
			ref.Name, ref.Key, ref.Key)}
	}
	return nil
}

func asPolicyError(name string, err error) *PolicyError {
	if pe := (*PolicyError)(nil); errors.As(err, &pe) {
		return pe
	}
	return &PolicyError{Policy: name, Reason: v1alpha1.ReasonInvalidSpec, Message: err.Error()}
}
