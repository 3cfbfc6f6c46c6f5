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

package envtest

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// loginRule is a rule with a ban; ban is the ban's YAML.
func loginRule(ban string) string {
	return `{rules: [{name: login, algorithm: SlidingWindowLog, limits: [{requests: 5, period: 1m}], ban: ` + ban + `}]}`
}

var _ = Describe("RateLimitPolicy ban validation", func() {
	DescribeTable("rejects an invalid ban with a message that names the rule",
		expectRefusedAlike,
		Entry("exempt rule with a ban",
			`{rules: [{name: health, exempt: true, ban: {after: {denials: 3, within: 1m}, durations: [5m]}}]}`,
			"rule health is exempt, so it cannot have a ban"),
		Entry("ban duration below 1s", loginRule(`{after: {denials: 3, within: 1m}, durations: [5m, 500ms]}`),
			"rule login has a ban duration that is not a duration between 1s and 744h"),
		Entry("ban duration above 744h", loginRule(`{after: {denials: 3, within: 1m}, durations: [745h]}`),
			"rule login has a ban duration that is not a duration between 1s and 744h"),
		Entry("ban duration that is not a duration", loginRule(`{after: {denials: 3, within: 1m}, durations: [a-day]}`),
			"rule login has a ban duration that is not a duration between 1s and 744h"),
		Entry("within above 24h", loginRule(`{after: {denials: 3, within: 25h}, durations: [5m]}`),
			"rule login has a ban whose after.within is not a duration between 1s and 24h"),
		Entry("forgetAfter below 1s", loginRule(`{after: {denials: 3, within: 1m}, durations: [5m], forgetAfter: 10ms}`),
			"rule login has a ban whose forgetAfter is not a duration between 1s and 744h"),
		Entry("no durations", loginRule(`{after: {denials: 3, within: 1m}, durations: []}`),
			"durations"),
		Entry("nine durations", loginRule(`{after: {denials: 3, within: 1m}, durations: [1s, 2s, 3s, 4s, 5s, 6s, 7s, 8s, 9s]}`),
			"durations"),
		Entry("no denials", loginRule(`{after: {denials: 0, within: 1m}, durations: [5m]}`),
			"denials"),
		Entry("too many denials", loginRule(`{after: {denials: 10001, within: 1m}, durations: [5m]}`),
			"denials"),
	)

	It("accepts the login rule of the issue and defaults forgetAfter to 24h", func() {
		Expect(createSpec(loginRule(`{after: {denials: 10, within: 1m}, durations: [5m, 1h, 24h], forgetAfter: 24h}`))).To(Succeed())
		Expect(createSpec(loginRule(`{after: {denials: 10, within: 1m}, durations: [5m]}`))).To(Succeed())
		Expect(parseSpec(loginRule(`{after: {denials: 10, within: 1m}, durations: [5m]}`))).To(Succeed())
	})
})

var _ = Describe("RateLimitPolicy ban status", func() {
	It("stores status.bans.active and shows it as the Bans column", func() {
		policy := &sluicev1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "with-bans", Namespace: namespace},
			Spec: sluicev1alpha1.RateLimitPolicySpec{
				Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
				UpstreamPort: 8080,
				Rules: []sluicev1alpha1.Rule{{
					Name:   "login",
					Limits: []sluicev1alpha1.Limit{{Requests: 5, Period: metav1.Duration{Duration: time.Minute}}},
					Ban: &sluicev1alpha1.Ban{After: sluicev1alpha1.BanTrigger{Denials: 10, Within: metav1.Duration{Duration: time.Minute}},
						Durations: []metav1.Duration{{Duration: 5 * time.Minute}}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Expect(policy.Spec.Rules[0].Ban.ForgetAfter).To(Equal(&metav1.Duration{Duration: 24 * time.Hour}), "the CRD defaults forgetAfter")
		policy.Status.Bans = &sluicev1alpha1.BanStatus{Active: 4}
		policy.Status.Decisions = sluicev1alpha1.DecisionCounts{Allowed: 10, Denied: 20, Banned: 30}
		Expect(k8sClient.Status().Update(ctx, policy)).To(Succeed())

		stored := &sluicev1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), stored)).To(Succeed())
		Expect(stored.Status.Bans).To(Equal(&sluicev1alpha1.BanStatus{Active: 4}))
		Expect(stored.Status.Decisions.Banned).To(BeEquivalentTo(30))

		table := getTable(policy)
		i := slices.IndexFunc(table.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Bans" })
		Expect(i).NotTo(Equal(-1))
		Expect(table.Rows[0].Cells[i]).To(BeEquivalentTo(4))
	})
})
