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
	"encoding/json"
	"io"
	"net/http"
	neturl "net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

// getTable fetches a policy the way kubectl get does: as a server-side table.
func getTable(policy *sluicev1alpha1.RateLimitPolicy) *metav1.Table {
	httpClient, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	url, err := neturl.JoinPath(cfg.Host, "apis/sluice.dev/v1alpha1/namespaces", policy.Namespace, "ratelimitpolicies", policy.Name)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s: %s", url, body)
	table := &metav1.Table{}
	Expect(json.Unmarshal(body, table)).To(Succeed())
	return table
}

var _ = Describe("Status", func() {
	It("is written through the status subresource and shown by kubectl get", func() {
		policy := &sluicev1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "with-status", Namespace: namespace},
			Spec: sluicev1alpha1.RateLimitPolicySpec{
				Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
				UpstreamPort: 8080,
				Mode:         sluicev1alpha1.ModeDryRun,
				Rules: []sluicev1alpha1.Rule{{
					Name:      "api",
					Algorithm: sluicev1alpha1.AlgorithmSlidingWindowCounter,
					Limits:    []sluicev1alpha1.Limit{{Requests: 60, Period: metav1.Duration{Duration: time.Minute}}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())

		policy.Status.ObservedGeneration = policy.Generation
		policy.Status.Algorithms = policy.Spec.Algorithms()
		policy.Status.FailureMode = sluicev1alpha1.FailureModeOpen // the manager's default, as the policy controller writes it
		policy.Status.Enforcers = sluicev1alpha1.EnforcerCounts{Selected: 3, Injected: 3, Ready: 2, UpToDate: 2}
		policy.Status.Enforcers.Summary = policy.Status.Enforcers.ReadySummary()
		policy.Status.Decisions = sluicev1alpha1.DecisionCounts{Allowed: 100, WouldDeny: 7}
		meta.SetStatusCondition(&policy.Status.Conditions, metav1.Condition{
			Type:               sluicev1alpha1.ConditionReady,
			Status:             metav1.ConditionFalse,
			Reason:             sluicev1alpha1.ReasonEnforcersNotReady,
			Message:            "1 of 3 enforcers is not ready",
			ObservedGeneration: policy.Generation,
		})
		Expect(k8sClient.Status().Update(ctx, policy)).To(Succeed())

		stored := &sluicev1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), stored)).To(Succeed())
		Expect(stored.Status.Decisions.WouldDeny).To(BeEquivalentTo(7))

		table := getTable(policy)
		var columns []string
		for _, c := range table.ColumnDefinitions {
			columns = append(columns, c.Name)
		}
		Expect(columns).To(Equal([]string{"Name", "Mode", "Algorithms", "Enforcers", "Ready", "Reason", "Failure Mode", "Protocol", "Bans", "Age"}))
		Expect(table.Rows).To(HaveLen(1))
		Expect(table.Rows[0].Cells[:8]).To(Equal([]any{"with-status", "DryRun", "SlidingWindowCounter", "2/3", "False", "EnforcersNotReady", "Open", "HTTP1"}),
			"an unset failureMode is the operator's default, not written into the spec: the column shows the one in effect, from status; upstreamProtocol is defaulted")
		Expect(policy.Spec.FailureMode).To(BeEmpty())
	})

	It("is not changed by a spec update", func() {
		policy := &sluicev1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "spec-only", Namespace: namespace},
			Spec: sluicev1alpha1.RateLimitPolicySpec{
				Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
				UpstreamPort: 8080,
				Rules: []sluicev1alpha1.Rule{{
					Name:   "api",
					Limits: []sluicev1alpha1.Limit{{Requests: 60, Period: metav1.Duration{Duration: time.Minute}}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())

		policy.Spec.Mode = sluicev1alpha1.ModeDryRun
		policy.Status.Algorithms = "FixedWindow"
		Expect(k8sClient.Update(ctx, policy)).To(Succeed())

		stored := &sluicev1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), stored)).To(Succeed())
		Expect(stored.Spec.Mode).To(Equal(sluicev1alpha1.ModeDryRun))
		Expect(stored.Status.Algorithms).To(BeEmpty())
		Expect(stored.Generation).To(BeEquivalentTo(2))
	})
})
