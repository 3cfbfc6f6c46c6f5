package config

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The enforcer's selector refuses and picks what the API's does, so that a
// policy selects the same pods in the operator and in the sidecar.
func TestLabelSelectorAsTheAPIs(t *testing.T) {
	long := "a123456789b123456789c123456789d123456789e123456789f123456789xyz" // 63
	selectors := []LabelSelector{
		{},
		{MatchLabels: map[string]string{"app": "api"}},
		{MatchLabels: map[string]string{"app.kubernetes.io/name": "api", "tier": ""}},
		{MatchLabels: map[string]string{"example.com/x": "a.b-c_d"}},
		{MatchLabels: map[string]string{"Example.com/x": "a"}},
		{MatchLabels: map[string]string{"/x": "a"}},
		{MatchLabels: map[string]string{"a/b/c": "a"}},
		{MatchLabels: map[string]string{"example.com/": "a"}},
		{MatchLabels: map[string]string{"-app": "a"}},
		{MatchLabels: map[string]string{"app": "-a"}},
		{MatchLabels: map[string]string{"app": "a b"}},
		{MatchLabels: map[string]string{long: long}},
		{MatchLabels: map[string]string{long + "x": "a"}},
		{MatchLabels: map[string]string{"app": long + "x"}},
		{MatchLabels: map[string]string{"ex-ample.c0m/a": "b"}},
		{MatchLabels: map[string]string{"example..com/a": "b"}},
		{MatchLabels: map[string]string{"-example.com/a": "b"}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"api", "web"}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "NotIn", Values: []string{"api"}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "Exists"}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "DoesNotExist"}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "In"}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "NotIn", Values: []string{}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "Exists", Values: []string{"api"}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "Near"}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "in", Values: []string{"api"}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"a b"}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "", Operator: "Exists"}}},
		{
			MatchLabels:      map[string]string{"tier": "backend"},
			MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"api"}}, {Key: "canary", Operator: "DoesNotExist"}},
		},
	}
	pods := []map[string]string{
		nil,
		{"app": "api"},
		{"app": "web", "tier": "backend"},
		{"app": "api", "tier": "backend"},
		{"app": "api", "tier": "backend", "canary": "true"},
		{"app.kubernetes.io/name": "api", "tier": ""},
		{"app.kubernetes.io/name": "api"},
		{"example.com/x": "a.b-c_d", long: long},
		{"tier": "frontend"},
	}
	for _, s := range selectors {
		api := metav1.LabelSelector{MatchLabels: s.MatchLabels}
		for _, r := range s.MatchExpressions {
			api.MatchExpressions = append(api.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values,
			})
		}
		sel, err := metav1.LabelSelectorAsSelector(&api)
		if problems := s.Problems(); (err != nil) != (len(problems) > 0) {
			t.Errorf("%+v: the API says %v, the enforcer %q", s, err, problems)
			continue
		}
		for _, pod := range pods {
			want := err == nil && sel.Matches(labels.Set(pod))
			if got := s.Matches(pod); got != want {
				t.Errorf("%+v picks %v: %v, the API's selector %v", s, pod, got, want)
			}
		}
	}
}
