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

package v1alpha1

// ResponseCost charges a request what the application reports it cost, in
// a response header or in the usage of an OpenAI-compatible JSON answer.
// The rule's cost is charged before the request is forwarded (a request
// needs that much room to pass); when the answer ends, the difference
// between the reported cost and the rule's cost is charged or given back.
// A charge after the answer always lands: it may take the tenant into
// debt, at most one limit deep, which its next requests wait out. A
// missing, malformed or negative report in a whole answer charges the
// rule's cost only; an answer whose report could not be read (see
// unfinishedCost) is charged unfinishedCost.
// +kubebuilder:validation:XValidation:rule="has(self.header) != has(self.jsonUsage)",message="responseCost sets exactly one of header (a response header with the cost, such as X-Sluice-Cost) or jsonUsage (a field of the usage object of an OpenAI-compatible JSON answer, such as total_tokens)"
type ResponseCost struct {
	// Header is the response header in which the application reports the
	// cost of the request, as a whole number; the enforcer removes it
	// before the client sees the answer. For gRPC, a header or a trailer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +optional
	Header string `json:"header,omitempty"`

	// JSONUsage is the field of the usage object of an OpenAI-compatible
	// JSON answer that holds the cost, such as total_tokens: usage.<field>
	// of a plain answer, or of the last data event of a streamed one
	// (stream_options.include_usage). At most the first 1 MiB of an
	// identity- or gzip-encoded body is read, alongside the copy to the
	// client, which it never delays.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="jsonUsage names the field inside usage, such as total_tokens (not a path such as usage.total_tokens): letters, digits and _, not starting with a digit"
	// +optional
	JSONUsage string `json:"jsonUsage,omitempty"`

	// UnfinishedCost is what a request is charged when its answer's report
	// could not be read: the application broke the answer off before the
	// report, or was still answering 30 seconds after the client had gone
	// (the enforcer reads on after a client hangs up, so that hanging up
	// saves nothing), or answered in an encoding the enforcer did not offer
	// it, or sent a usage object over 64 KiB. Set it to the most one
	// request may cost (a model's context window, say); unset, it is the
	// rule's cost.
	// +kubebuilder:validation:Minimum=1
	// +optional
	UnfinishedCost *int64 `json:"unfinishedCost,omitempty"`
}

// CountResponses counts a request only when its answer matches: it is
// charged before it is forwarded, as usual, and given back, in the window
// it was counted in, when the answer matches none of the statuses, so that
// a login rule counts failed attempts only.
// +kubebuilder:validation:XValidation:rule="(has(self.statuses) && size(self.statuses) > 0) || (has(self.grpcStatuses) && size(self.grpcStatuses) > 0)",message="countResponses counts nothing: list the HTTP statuses to count in statuses (such as \"401\" or \"5xx\") or the gRPC codes in grpcStatuses (such as UNAUTHENTICATED)"
type CountResponses struct {
	// Statuses are the HTTP statuses of the answers that count: a code
	// such as "401", or a class such as "5xx".
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=3
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.matches('^[1-5]([0-9][0-9]|xx)$'))",message="statuses must be HTTP status codes such as \"401\" or classes such as \"5xx\", quoted"
	// +optional
	Statuses []string `json:"statuses,omitempty"`

	// GRPCStatuses are the gRPC status codes of the calls that count, by
	// name, such as UNAUTHENTICATED. A gRPC call's status is its
	// grpc-status trailer (or header, for a trailers-only answer).
	// +listType=set
	// +kubebuilder:validation:MaxItems=17
	// +optional
	GRPCStatuses []GRPCCode `json:"grpcStatuses,omitempty"`
}

// GRPCCode is the name of a gRPC status code.
// +kubebuilder:validation:Enum=OK;CANCELLED;UNKNOWN;INVALID_ARGUMENT;DEADLINE_EXCEEDED;NOT_FOUND;ALREADY_EXISTS;PERMISSION_DENIED;RESOURCE_EXHAUSTED;FAILED_PRECONDITION;ABORTED;OUT_OF_RANGE;UNIMPLEMENTED;INTERNAL;UNAVAILABLE;DATA_LOSS;UNAUTHENTICATED
type GRPCCode string
