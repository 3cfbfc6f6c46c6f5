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

package compile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// Service compiles the rateLimitService policies of one namespace into the
// configuration of the rate limit service's pods (cmd/ratelimit): a policy
// with a domain for each, which the service applies as it applies
// envoyproxy/ratelimit files (enforcer/rls). The enforcer sidecars' policies
// are Namespace's. Options and the Result are as for Namespace, with
// Options.Previous the service's configuration published so far; a policy
// whose domain an older one holds is refused (DomainConflicts) and has no
// entry, not even its previous one.
func Service(namespace string, policies []v1alpha1.RateLimitPolicy, opts Options) (*Result, error) {
	service := slices.DeleteFunc(slices.Clone(policies), func(p v1alpha1.RateLimitPolicy) bool { return !IsRateLimitService(p) })
	conflicts := DomainConflicts(service, opts.Previous)
	holders := map[string]string{} // domain -> the policy that holds it
	for i := range service {
		if p := &service[i]; conflicts[p.Name] == nil {
			holders[p.Spec.RateLimitService.Domain] = p.Name
		}
	}
	// A previous entry is kept only under the domain its policy holds now:
	// a policy that moved to a domain another holds, and failed, keeps none.
	return compileSet(namespace, service, opts, conflicts, func(prev *config.Policy, p *v1alpha1.RateLimitPolicy) bool {
		return prev.Domain != "" && holders[prev.Domain] == p.Name
	})
}

// DomainConflicts refuses, of the rateLimitService policies of a namespace
// that name one domain, all but the oldest: a call names a domain, and one
// policy answers it. Older is by creation time, then, of two created in the
// same second, the one previous publishes under that domain, then by name.
// previous is the service's configuration published so far, or nil. The
// result is by policy name; each error says which policy holds the domain.
func DomainConflicts(policies []v1alpha1.RateLimitPolicy, previous *config.Config) map[string]*PolicyError {
	published := func(p *v1alpha1.RateLimitPolicy) bool {
		prev, ok := previous.Entry(p.Name, string(p.UID))
		return ok && prev.Domain == p.Spec.RateLimitService.Domain
	}
	var ordered []*v1alpha1.RateLimitPolicy
	for i := range policies {
		if p := &policies[i]; IsRateLimitService(*p) {
			ordered = append(ordered, p)
		}
	}
	slices.SortStableFunc(ordered, func(a, b *v1alpha1.RateLimitPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		if pa, pb := published(a), published(b); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	conflicts := map[string]*PolicyError{}
	holders := map[string]string{}
	for _, p := range ordered {
		domain := p.Spec.RateLimitService.Domain
		holder, taken := holders[domain]
		if !taken {
			holders[domain] = p.Name
			continue
		}
		conflicts[p.Name] = &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonConflictingDomains, Message: fmt.Sprintf(
			"policy %s, created before, holds rateLimitService.domain %s, and the calls of a domain are answered by one policy: "+
				"give this policy another domain (and Envoy's rate limit filter or actions the same), or move its rules into policy %s",
			holder, domain, holder)}
	}
	return conflicts
}
