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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/controllers/conditions"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// maxStatusBytes bounds the /status document read from a pod.
const maxStatusBytes = 1 << 20

// adminAddress is host:port of the admin listener that serves the pod's
// /status, from the pod's IP and the admin port: the sidecar's
// sluice-admin, or for a pod of the rate limit service its container's
// admin port. Empty with the reason when the pod has no IP yet or no such
// port.
func adminAddress(pod *corev1.Pod) (string, string) {
	c, portName, what := inject.EnforcerContainer(pod), wellknown.AdminPortName, "an enforcer"
	if isRateLimitServicePod(pod) {
		c, portName, what = rateLimitServiceContainer(pod), wellknown.RateLimitServiceAdminPortName, "a container "+wellknown.RateLimitServiceContainerName
		if c == nil {
			return "", "has no container named " + wellknown.RateLimitServiceContainerName
		}
	}
	if c == nil {
		return "", "has no enforcer"
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == portName {
			port = p.ContainerPort
		}
	}
	if port == 0 {
		return "", "has " + what + " without a port named " + portName
	}
	if pod.Status.PodIP == "" {
		phase := pod.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		return "", fmt.Sprintf("has no IP yet (%s)", phase)
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))), ""
}

// errCredentialRefused marks an enforcer that answered 401 or 403: it
// does not take the namespace's status token.
var errCredentialRefused = errors.New("enforcer refused the status credential")

// fetchEnforcerStatus reads the /status document of the enforcer at addr,
// presenting token (the namespace's admin Secret) as a bearer token.
func fetchEnforcerStatus(ctx context.Context, c *http.Client, addr, token string) (*statusdoc.Document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+statusdoc.Path, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, unwrapURLError(err)
	}
	defer func() { _ = resp.Body.Close() }()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		why := refusalReason(resp)
		if token == "" {
			why += "; the namespace has no Secret " + wellknown.AdminSecretName + " yet"
		}
		return nil, fmt.Errorf("%w: %s", errCredentialRefused, why)
	default:
		return nil, fmt.Errorf("/status answered %s", refusalReason(resp))
	}
	var st statusdoc.Document
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxStatusBytes)).Decode(&st); err != nil {
		return nil, fmt.Errorf("/status is not an enforcer status document: %w", err)
	}
	return &st, nil
}

// refusalReason is the status of a refused /status request with the
// enforcer's explanation, its JSON {"error": ...} body.
func refusalReason(resp *http.Response) string {
	var body struct {
		Error string `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body) == nil && body.Error != "" {
		return resp.Status + ": " + conditions.Truncate(body.Error, 200)
	}
	return resp.Status
}

// unwrapURLError drops the method and URL that *url.Error repeats: the
// message names the address already.
func unwrapURLError(err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return opErr.Err
	}
	return err
}

// pollEnforcer reads the /status of the pod's enforcer with token, within
// the client's timeout. A pod without an admin address gets its reason as
// error.
func pollEnforcer(ctx context.Context, c *http.Client, pod *corev1.Pod, token string) polledEnforcer {
	addr, why := adminAddress(pod)
	if addr == "" {
		return polledEnforcer{Err: why}
	}
	st, err := fetchEnforcerStatus(ctx, c, addr, token)
	res := polledEnforcer{Address: addr, Status: st, Refused: errors.Is(err, errCredentialRefused)}
	if err != nil {
		res.Err = err.Error()
	}
	return res
}

// polledEnforcer is what polling one pod's enforcer found: its status, or
// why there is none. Without an Address, Err says why the pod could not be
// asked ("has no IP yet (Pending)"); with one, why it did not answer.
type polledEnforcer struct {
	Address string
	Status  *statusdoc.Document
	Err     string
	// Refused is set when the enforcer refused the status credential.
	Refused bool
}
