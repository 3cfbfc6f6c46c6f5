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

package enforcerstatus

import (
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/inject"
)

// podsNamedInMessage is how many pods a Ready message names before it says
// "and N more".
const podsNamedInMessage = 3

// selectedPod is one pod a policy selects, as the status controller found it.
type selectedPod struct {
	Pod *corev1.Pod
	// Decision is what the webhook would decide for the pod now, or
	// inject.ReasonNamespaceNotEnabled; it explains a pod without an enforcer.
	Decision inject.Decision
	// Polled is the enforcer's /status, for a pod with an enforcer, or the
	// service's, for a pod of the rate limit service.
	Polled polledEnforcer
	// Service is set for a pod of the rate limit service, which the
	// policies with spec.rateLimitService of its namespace count; it has no
	// Decision.
	Service bool
}

// setEnforcerStatus computes the part of the status the status controller
// owns, enforcers, decisions and Ready, and returns the Event of a Ready
// transition, or nil. published is what the namespace's configurations
// hold for the policy: an enforcer running the policy's generation from a
// configuration whose entry for it differs (another pod count, for
// LocalFallback's share) is not up to date yet.
func setEnforcerStatus(p *v1alpha1.RateLimitPolicy, pods []selectedPod, published publishedEntries, now metav1.Time) *conditions.Event {
	var before *metav1.Condition
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		before = c.DeepCopy()
	}
	check := checkEnforcers(p, pods, published)
	p.Status.Enforcers = check.counts
	p.Status.Decisions = check.decisions
	p.Status.Bans = check.bans
	p.Status.TopTenants = check.top.status()
	cond := readyCondition(p, check)
	cond.LastTransitionTime = now
	apimeta.SetStatusCondition(&p.Status.Conditions, cond)
	return readyEvent(before, apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady))
}

// enforcerCheck sorts a policy's selected pods by what keeps each from
// enforcing the current generation.
type enforcerCheck struct {
	// service is set for a policy of the rate limit service: its pods are
	// the service's, and run no sidecar.
	service   bool
	counts    v1alpha1.EnforcerCounts
	decisions v1alpha1.DecisionCounts
	// bans are the policy's bans in force, nil when no enforcer counted them.
	bans *v1alpha1.BanStatus
	// top are the enforcers' top tenants, with spec.status.topTenants.
	top topTenants
	// notInjected pods run without an enforcer.
	notInjected []selectedPod
	// optedOut pods run without an enforcer by the user's choice: they are
	// reported, not counted, and do not hold Ready.
	optedOut []selectedPod
	// unreachable enforcers did not answer /status (or the pod has no IP).
	unreachable []selectedPod
	// notReady enforcers answered but are not ready for another reason
	// than the ones below.
	notReady []selectedPod
	// stale enforcers run an older generation or refused the new config;
	// missing ones do not apply this policy at all.
	stale, missing []selectedPod
	// degraded enforcers run the current generation but cannot reach its
	// Redis, and apply spec.failureMode.
	degraded []degradedEnforcer
	// loaded are the generations that stale enforcers run.
	loaded []int64
	// outdated enforcers run the current generation from an older
	// configuration of the namespace, whose entry for the policy differs
	// from the published one.
	outdated []selectedPod
	// restart enforcers forward to another port than spec.upstreamPort:
	// the port is an argument of the enforcer, fixed when its pod started.
	restart []restartEnforcer
	// overloaded enforcers refuse new requests for want of room.
	overloaded []overloadedEnforcer
}

type overloadedEnforcer struct {
	pod      *corev1.Pod
	overload *statusdoc.Overload
}

type restartEnforcer struct {
	selectedPod
	port int32
}

type degradedEnforcer struct {
	pod         *corev1.Pod
	err         string
	failureMode string
}

func checkEnforcers(p *v1alpha1.RateLimitPolicy, pods []selectedPod, published publishedEntries) enforcerCheck {
	c := enforcerCheck{service: compile.IsRateLimitService(*p)}
	for _, sp := range pods {
		if c.service {
			// A service pod runs the service: neither injected nor opted out.
			c.counts.Selected++
			c.counts.Injected++
			c.pollAnswer(p, sp, published)
			continue
		}
		if !inject.HasEnforcer(sp.Pod) && sp.Decision.Reason == inject.ReasonOptedOut {
			c.optedOut = append(c.optedOut, sp)
			continue
		}
		c.counts.Selected++
		if !inject.HasEnforcer(sp.Pod) {
			c.notInjected = append(c.notInjected, sp)
			continue
		}
		c.counts.Injected++
		c.pollAnswer(p, sp, published)
	}
	slices.Sort(c.loaded)
	c.counts.Summary = c.counts.ReadySummary()
	return c
}

// pollAnswer sorts the pod by the /status its enforcer, or its rate limit
// service, answered.
func (c *enforcerCheck) pollAnswer(p *v1alpha1.RateLimitPolicy, sp selectedPod, published publishedEntries) {
	st := sp.Polled.Status
	if st == nil {
		c.unreachable = append(c.unreachable, sp)
		return
	}
	if st.Ready {
		c.counts.Ready++
	}
	d := st.Decisions[p.Name]
	c.decisions.Allowed += d.Allowed
	c.decisions.Denied += d.Denied
	c.decisions.WouldDeny += d.WouldDeny
	c.decisions.Banned += d.Banned
	c.bans = addBans(c.bans, st, p)
	c.top.add(st, p)

	if o := st.Overload; o != nil && o.Overloaded {
		c.counts.Overloaded++
		c.overloaded = append(c.overloaded, overloadedEnforcer{pod: sp.Pod, overload: o})
	}
	loaded := loadedPolicy(st, p)
	switch {
	case loaded == nil:
		c.missing = append(c.missing, sp)
	case loaded.Generation != p.Generation:
		c.stale = append(c.stale, sp)
		if !slices.Contains(c.loaded, loaded.Generation) {
			c.loaded = append(c.loaded, loaded.Generation)
		}
	case !published.runsCurrentEntry(st.Config.Hash):
		c.outdated = append(c.outdated, sp)
	case !c.service && forwardsElsewhere(st, p):
		port, _ := upstreamPortOf(st)
		c.restart = append(c.restart, restartEnforcer{selectedPod: sp, port: port})
	default:
		c.counts.UpToDate++
		if redis := redisOf(st, loaded.Redis); redis != nil && !redis.Reachable {
			c.counts.Degraded++
			c.degraded = append(c.degraded, degradedEnforcer{pod: sp.Pod, err: redis.LastError, failureMode: loaded.FailureMode})
			return
		}
		if !st.Ready {
			c.notReady = append(c.notReady, sp)
		}
	}
}

// loadedPolicy is the enforcer's entry for p, matched by UID so that a
// policy deleted and created again under its name is not taken for it.
func loadedPolicy(st *statusdoc.Document, p *v1alpha1.RateLimitPolicy) *statusdoc.Policy {
	for i := range st.Policies {
		if st.Policies[i].UID == string(p.UID) && st.Policies[i].Name == p.Name {
			return &st.Policies[i]
		}
	}
	return nil
}

// forwardsElsewhere says whether the enforcer forwards to another port than
// p's upstreamPort. An enforcer too old to report its upstream is taken at
// its word of the generation it runs.
func forwardsElsewhere(st *statusdoc.Document, p *v1alpha1.RateLimitPolicy) bool {
	port, ok := upstreamPortOf(st)
	return ok && port != p.Spec.UpstreamPort
}

// upstreamPortOf is the port of the enforcer's upstream URL; false when it
// reports none.
func upstreamPortOf(st *statusdoc.Document) (int32, bool) {
	u, err := url.Parse(st.Upstream)
	if st.Upstream == "" || err != nil {
		return 0, false
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(port), true
}

func redisOf(st *statusdoc.Document, name string) *statusdoc.Redis {
	for i := range st.Redis {
		if st.Redis[i].Name == name {
			return &st.Redis[i]
		}
	}
	return nil
}
