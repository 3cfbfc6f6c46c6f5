package config

import (
	"fmt"
	"slices"
	"strings"
)

// LabelSelector is a Kubernetes label selector, written as the API's
// (metav1.LabelSelector): the pods it picks have every label of
// MatchLabels and meet every requirement of MatchExpressions; an empty one
// picks every pod. It is the wire format's own type, with the API's
// validation and meaning, so that the enforcer links none of
// k8s.io/apimachinery: its packages' initialisation and pages were about
// 1 MiB of the sidecar's idle resident memory (docs/design/0013).
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is a requirement on one label: Operator In or
// NotIn with Values, Exists or DoesNotExist without.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// The operators of a LabelSelectorRequirement.
const (
	SelectorOpIn           = "In"
	SelectorOpNotIn        = "NotIn"
	SelectorOpExists       = "Exists"
	SelectorOpDoesNotExist = "DoesNotExist"
)

// Problems are the reasons s is not a valid selector, none if it is: what
// metav1.LabelSelectorAsSelector refuses.
func (s *LabelSelector) Problems() []string {
	var errs []string
	for _, k := range sortedKeys(s.MatchLabels) {
		for _, e := range LabelKeyProblems(k) {
			errs = append(errs, fmt.Sprintf("matchLabels: key %q: %s", k, e))
		}
		for _, e := range labelValueProblems(s.MatchLabels[k]) {
			errs = append(errs, fmt.Sprintf("matchLabels[%q]: value %q: %s", k, s.MatchLabels[k], e))
		}
	}
	for i, r := range s.MatchExpressions {
		at := fmt.Sprintf("matchExpressions[%d]", i)
		for _, e := range LabelKeyProblems(r.Key) {
			errs = append(errs, fmt.Sprintf("%s.key: %q: %s", at, r.Key, e))
		}
		switch r.Operator {
		case SelectorOpIn, SelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, fmt.Sprintf("%s.values: must not be empty with operator %s", at, r.Operator))
			}
		case SelectorOpExists, SelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, fmt.Sprintf("%s.values: must be empty with operator %s", at, r.Operator))
			}
		default:
			errs = append(errs, fmt.Sprintf("%s.operator: %q is not a valid label selector operator (In, NotIn, Exists, DoesNotExist)", at, r.Operator))
		}
		for j, v := range r.Values {
			for _, e := range labelValueProblems(v) {
				errs = append(errs, fmt.Sprintf("%s.values[%d]: %q: %s", at, j, v, e))
			}
		}
	}
	return errs
}

// Matches reports whether a pod with these labels is one s picks. An
// invalid s (Problems) picks none.
func (s *LabelSelector) Matches(podLabels map[string]string) bool {
	if len(s.Problems()) > 0 {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := podLabels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		v, ok := podLabels[r.Key]
		switch r.Operator {
		case SelectorOpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case SelectorOpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case SelectorOpExists:
			if !ok {
				return false
			}
		case SelectorOpDoesNotExist:
			if ok {
				return false
			}
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// LabelKeyProblems are the reasons key is not a valid label key, none if
// it is: an optional DNS subdomain prefix and a slash, then a name of at
// most 63 characters, alphanumeric at both ends, with '-', '_' and '.'
// between (Kubernetes' IsQualifiedName).
func LabelKeyProblems(key string) []string {
	name := key
	var errs []string
	if prefix, rest, ok := strings.Cut(key, "/"); ok {
		name = rest
		switch {
		case prefix == "":
			errs = append(errs, "prefix part must not be empty")
		case len(prefix) > 253:
			errs = append(errs, "prefix part must be no more than 253 characters")
		case !isDNSSubdomain(prefix):
			errs = append(errs, "prefix part must be a lowercase DNS subdomain (e.g. 'example.com')")
		}
		if strings.Contains(rest, "/") {
			return append(errs, "must be a name, optionally prefixed by a DNS subdomain and '/' (e.g. 'example.com/MyName')")
		}
	}
	switch {
	case name == "":
		errs = append(errs, "name part must not be empty")
	case len(name) > 63:
		errs = append(errs, "name part must be no more than 63 characters")
	case !isLabelName(name):
		errs = append(errs, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
	}
	return errs
}

// labelValueProblems are the reasons v is not a valid label value: empty,
// or at most 63 characters as a label key's name part.
func labelValueProblems(v string) []string {
	switch {
	case v == "":
		return nil
	case len(v) > 63:
		return []string{"must be no more than 63 characters"}
	case !isLabelName(v):
		return []string{"must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"}
	}
	return nil
}

func isAlphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isLabelName: ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], s not empty.
func isLabelName(s string) bool {
	if !isAlphanumeric(s[0]) || !isAlphanumeric(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlphanumeric(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isDNSSubdomain: dot-separated labels of lowercase alphanumerics and '-',
// each alphanumeric at both ends.
func isDNSSubdomain(s string) bool {
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
