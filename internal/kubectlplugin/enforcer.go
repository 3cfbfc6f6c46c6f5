package kubectlplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// EnforcerDialer opens a way to a pod's admin port: a local base URL
// ("http://127.0.0.1:PORT") and what closes it.
type EnforcerDialer interface {
	Open(ctx context.Context, c *Clients, pod *corev1.Pod, port int32) (base string, closer func(), err error)
}

// PortForwarder reaches a pod's port through the API server
// (pods/portforward), as kubectl port-forward does, on a loopback port of
// this machine chosen by the kernel.
type PortForwarder struct{}

// forwardTimeout bounds the set-up of one port-forward.
const forwardTimeout = 30 * time.Second

// Open starts the port-forward and returns once it listens.
func (PortForwarder) Open(ctx context.Context, c *Clients, pod *corev1.Pod, port int32) (string, func(), error) {
	transport, upgrader, err := spdy.RoundTripperFor(c.Config)
	if err != nil {
		return "", nil, err
	}
	u := c.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(port))}, stop, ready, io.Discard, &errOut)
	if err != nil {
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	timer := time.NewTimer(forwardTimeout)
	defer timer.Stop()
	select {
	case <-ready:
	case err := <-done:
		return "", nil, apiError(fmt.Errorf("port-forward to pod %s: %w", pod.Name, err), "create", "pods/portforward", pod.Namespace, "")
	case <-timer.C:
		close(stop)
		return "", nil, fmt.Errorf("port-forward to pod %s: not ready after %s", pod.Name, forwardTimeout)
	case <-ctx.Done():
		close(stop)
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err == nil && len(ports) == 0 {
		err = errors.New("none listens")
	}
	if err != nil {
		close(stop)
		return "", nil, fmt.Errorf("port-forward to pod %s: no local port: %w", pod.Name, err)
	}
	return "http://127.0.0.1:" + strconv.Itoa(int(ports[0].Local)), func() { close(stop) }, nil
}

// Enforcer is an open way to one enforcer's admin port, with one of the
// namespace's admin tokens. The token is never printed.
type Enforcer struct {
	Pod    string
	base   string
	token  string
	http   *http.Client
	closer func()
}

// Close ends the port-forward.
func (e *Enforcer) Close() {
	if e.closer != nil {
		e.closer()
	}
}

// openEnforcer reaches pod's enforcer: a port-forward to its admin port,
// with the token that grants access, read from the namespace's Secret
// (tokenSecret).
func (o *Options) openEnforcer(ctx context.Context, c *Clients, pod *corev1.Pod, access debugapi.Access) (*Enforcer, error) {
	port, why := adminPort(pod)
	if why != "" {
		return nil, fmt.Errorf("pod %s %s", pod.Name, why)
	}
	name := o.tokenSecret(pod, access)
	if err := c.require(ctx, permission{verb: "get", resource: "secrets", name: name},
		permission{verb: "create", resource: "pods", subresource: "portforward"}); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret); err != nil {
		return nil, apiError(err, "get", "secrets", c.Namespace, name)
	}
	token := strings.TrimSpace(string(secret.Data[wellknown.AdminTokenKey]))
	if token == "" {
		return nil, fmt.Errorf("secret %s has no %s yet: the manager writes it when it compiles the namespace's policies", name, wellknown.AdminTokenKey)
	}
	dialer := o.Enforcers
	if dialer == nil {
		dialer = PortForwarder{}
	}
	base, closer, err := dialer.Open(ctx, c, pod, port)
	if err != nil {
		return nil, err
	}
	return &Enforcer{Pod: pod.Name, base: base, token: token, closer: closer, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// tokenSecret names the Secret of the token that grants access on pod's
// enforcer: the read token's, or the write token's for a write. A pod
// injected before the write token has the read token alone, which its
// enforcer takes for writes too: that one, with a warning, until the pod
// is restarted.
func (o *Options) tokenSecret(pod *corev1.Pod, access debugapi.Access) string {
	if access != debugapi.Write {
		return wellknown.AdminSecretName
	}
	if inject.MountsWriteToken(pod) {
		return wellknown.AdminWriteSecretName
	}
	if o.ErrOut != nil {
		fmt.Fprintf(o.ErrOut, "warning: pod %s was injected before the write token: its enforcer takes the token of Secret %s for writes until the pod is restarted\n",
			pod.Name, wellknown.AdminSecretName)
	}
	return wellknown.AdminSecretName
}

// adminPort is the port of the pod's enforcer named sluice-admin; the
// reason when it has none.
func adminPort(pod *corev1.Pod) (int32, string) {
	c := inject.EnforcerContainer(pod)
	if c == nil {
		return 0, "has no enforcer (no container " + wellknown.EnforcerContainerName + ")"
	}
	for _, p := range c.Ports {
		if p.Name == wellknown.AdminPortName {
			return p.ContainerPort, ""
		}
	}
	return 0, "has an enforcer without a port named " + wellknown.AdminPortName
}

// call sends method path?q with the token and decodes the JSON answer
// into out; an answer other than 200 is its error message.
func (e *Enforcer) call(ctx context.Context, method, path string, q url.Values, out any) error {
	u := e.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("enforcer of pod %s: %w", e.Pod, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("enforcer of pod %s: %w", e.Pod, err)
	}
	if resp.StatusCode != http.StatusOK {
		var problem struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &problem) == nil && problem.Error != "" {
			return fmt.Errorf("enforcer of pod %s answered %d: %s", e.Pod, resp.StatusCode, problem.Error)
		}
		return fmt.Errorf("enforcer of pod %s answered %d (an enforcer older than this plugin?)", e.Pod, resp.StatusCode)
	}
	return json.Unmarshal(body, out)
}

// enforcerPods are the running pods with a ready enforcer that policy p
// selects, by name.
func enforcerPods(pods []corev1.Pod, p *v1alpha1.RateLimitPolicy) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || !inject.HasEnforcer(pod) {
			continue
		}
		if len(inject.SelectingPolicies(pod, []v1alpha1.RateLimitPolicy{*p})) == 0 {
			continue
		}
		out = append(out, pod)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// policyEnforcer opens one enforcer of policy name, for access: the first
// running pod it selects that has one.
func (o *Options) policyEnforcer(ctx context.Context, c *Clients, name string, access debugapi.Access) (*v1alpha1.RateLimitPolicy, *Enforcer, error) {
	p, err := c.getPolicy(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.listPods(ctx)
	if err != nil {
		return nil, nil, err
	}
	candidates := enforcerPods(pods, p)
	if len(candidates) == 0 {
		return nil, nil, fmt.Errorf("no running pod selected by policy %s has an enforcer: kubectl sluice explain POD says why", name)
	}
	e, err := o.openEnforcer(ctx, c, candidates[0], access)
	return p, e, err
}
