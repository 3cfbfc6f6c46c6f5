// Package crd holds the CustomResourceDefinitions that controller-gen writes
// to bases/ (make manifests), embedded so that a binary can hold a policy to
// the same schema and CEL rules as the API server without a cluster.
package crd

import _ "embed"

// RateLimitPolicies is the CustomResourceDefinition of RateLimitPolicy, as
// generated.
//
//go:embed bases/sluice.dev_ratelimitpolicies.yaml
var RateLimitPolicies []byte
