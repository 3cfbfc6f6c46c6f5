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

package main

import (
	"errors"
	"flag"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sluice-dev/sluice/controllers/policy"
)

// networkPolicyOptions are the flags of the NetworkPolicy fencing the
// enforcers' admin port.
type networkPolicyOptions struct {
	enabled          bool
	managerNamespace string
	managerLabels    string
	metricsLabels    string
}

func (o *networkPolicyOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "enforcer-network-policy", false,
		"keep a NetworkPolicy in each namespace with policies that allows the enforcers' admin port only from the manager "+
			"(and --enforcer-network-policy-metrics-namespaces); off where the CNI does not enforce NetworkPolicies")
	fs.StringVar(&o.managerNamespace, "enforcer-network-policy-manager-namespace", "", "namespace of the manager's pods (required with --enforcer-network-policy)")
	fs.StringVar(&o.managerLabels, "enforcer-network-policy-manager-labels", "",
		"labels of the manager's pods, k=v,k2=v2 (required with --enforcer-network-policy)")
	fs.StringVar(&o.metricsLabels, "enforcer-network-policy-metrics-namespaces", "",
		"labels of the namespaces allowed to scrape the enforcers' /metrics, k=v,k2=v2 (empty: none)")
}

// policy is the NetworkPolicy to keep, nil when it is off.
func (o *networkPolicyOptions) policy(adminPort int) (*policy.EnforcerNetworkPolicy, []error) {
	if !o.enabled {
		return nil, nil
	}
	var errs []error
	if msgs := validation.IsDNS1123Label(o.managerNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--enforcer-network-policy-manager-namespace %q is not a namespace name", o.managerNamespace))
	}
	manager, err := labels.ConvertSelectorToLabelsMap(o.managerLabels)
	if err != nil || len(manager) == 0 {
		errs = append(errs, errors.New("--enforcer-network-policy-manager-labels: write the manager pods' labels as k=v,k2=v2"))
	}
	np := &policy.EnforcerNetworkPolicy{AdminPort: int32(adminPort), ManagerNamespace: o.managerNamespace, ManagerPodLabels: manager}
	if o.metricsLabels != "" {
		metrics, err := labels.ConvertSelectorToLabelsMap(o.metricsLabels)
		if err != nil {
			errs = append(errs, fmt.Errorf("--enforcer-network-policy-metrics-namespaces: %w", err))
		}
		np.MetricsNamespaces = &metav1.LabelSelector{MatchLabels: metrics}
	}
	return np, errs
}
