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

package inject

import (
	"errors"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
)

// EnforcerSidecar is how the webhook injects the enforcer, from the
// manager's flags.
type EnforcerSidecar struct {
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// HTTPPort and AdminPort are the enforcer's ports in the pod: they must
	// not collide with the application's.
	HTTPPort  int32
	AdminPort int32
	Resources corev1.ResourceRequirements
	// RunAsUser is the enforcer's non-root user.
	RunAsUser int64
	// MaxProcs is the enforcer's GOMAXPROCS, 0 for Go's default (see
	// DefaultEnforcerMaxProcs).
	MaxProcs int
	// DefaultRedisSecret names a Secret key holding the default Redis URL;
	// the Secret must exist in each injected namespace. It wins over
	// DefaultRedisURL.
	DefaultRedisSecret *corev1.SecretKeySelector
	// DefaultRedisURL is the default Redis URL, injected as a plain value:
	// it must not carry a password (see ValidateDefaultRedisURL).
	DefaultRedisURL string
	// ExtraArgs are more enforcer flags (--NAME=VALUE), after the
	// injector's own: the limits an operator tunes.
	ExtraArgs []string
}

// DefaultEnforcerMaxProcs is the injected enforcer's GOMAXPROCS unless the
// operator says otherwise. Left to Go, a sidecar without a CPU limit runs
// as many threads of Go code as the node has CPUs, however little of them
// it gets: with more threads than the CPUs it is given, the enforcer spent
// 14-20% more CPU per request and had longer tails (docs/performance.md,
// "Threads").
const DefaultEnforcerMaxProcs = 2

// MaxEnforcerMaxProcs bounds the operator's choice.
const MaxEnforcerMaxProcs = 256

func (s *EnforcerSidecar) hasDefaultRedis() bool {
	return s.DefaultRedisSecret != nil || s.DefaultRedisURL != ""
}

// ValidateDefaultRedisURL refuses a default Redis URL with a password: the
// webhook would copy it into every injected pod spec. Such a URL belongs in
// a Secret, named with EnforcerSidecar.DefaultRedisSecret.
func ValidateDefaultRedisURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("default Redis URL is not a URL: %w", err)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return errors.New("the default Redis URL carries a password, which injection would copy into every pod spec: " +
			"put the URL in a Secret of each injected namespace and name it with --default-redis-secret")
	}
	return nil
}
