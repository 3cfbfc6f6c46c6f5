package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// CreateNamespace creates a namespace with injection enabled.
func (s *Stack) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{wellknown.InjectionNamespaceLabel: wellknown.InjectionEnabled},
	}}
	return s.Client.Create(ctx, ns)
}

// ParsePolicies reads RateLimitPolicies from YAML documents.
func ParsePolicies(data []byte) ([]*v1alpha1.RateLimitPolicy, error) {
	var out []*v1alpha1.RateLimitPolicy
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		p := &v1alpha1.RateLimitPolicy{}
		if err := yaml.UnmarshalStrict(doc, p); err != nil {
			return nil, err
		}
		if p.Name != "" {
			out = append(out, p)
		}
	}
}

// Samples reads the policies of config/samples, in file name order.
func (s *Stack) Samples() ([]*v1alpha1.RateLimitPolicy, error) {
	files, err := filepath.Glob(filepath.Join(s.root, "config", "samples", "ratelimitpolicy_*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []*v1alpha1.RateLimitPolicy
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		policies, err := ParsePolicies(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, policies...)
	}
	return out, nil
}

// CreatePolicies creates policies in namespace.
func (s *Stack) CreatePolicies(ctx context.Context, namespace string, policies ...*v1alpha1.RateLimitPolicy) error {
	for _, p := range policies {
		p.Namespace = namespace
		if err := s.Client.Create(ctx, p); err != nil {
			return fmt.Errorf("create RateLimitPolicy %s/%s: %w", namespace, p.Name, err)
		}
	}
	return nil
}

// AppPod is a pod of an application listening on port, as a Deployment
// would create it: the webhook decides whether it gets the enforcer. Set
// Spec.NodeName to NodeName for pods/portforward to reach it (a bound pod
// is deleted gracefully, no longer at once).
func AppPod(namespace, name string, labels map[string]string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "example.com/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		}}},
	}
}

// Endpoint is a running pod's enforcer: where clients and the operator
// reach it.
type Endpoint struct {
	Namespace, Pod string
	IP             string
	// HTTP is the proxy's base URL (the sluice-http port), Admin the admin
	// listener's (sluice-admin), Debug the debug listener's (the pod's
	// loopback in a cluster; empty when the enforcer has none).
	HTTP, Admin, Debug string
}

// WaitReady waits until the pods run with a ready enforcer and returns
// their endpoints in the order of names. A pod without an injected
// enforcer is an error: the webhook did not inject it.
func (s *Stack) WaitReady(ctx context.Context, namespace string, names ...string) ([]Endpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out := make([]Endpoint, len(names))
	for i, name := range names {
		for {
			var pod corev1.Pod
			err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pod)
			if err == nil {
				ep, ready, err := endpointOf(&pod)
				if err != nil {
					return nil, err
				}
				if ready {
					out[i] = ep
					break
				}
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("pod %s/%s has no ready enforcer: %w; see %s", namespace, name, ctx.Err(), filepath.Join(s.Dir, "kubelet.log"))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return out, nil
}

// endpointOf is the enforcer endpoint of a pod, and whether it is ready.
func endpointOf(pod *corev1.Pod) (Endpoint, bool, error) {
	var enforcer *corev1.Container
	for i, c := range pod.Spec.InitContainers {
		if c.Name == wellknown.EnforcerContainerName {
			enforcer = &pod.Spec.InitContainers[i]
		}
	}
	if enforcer == nil {
		return Endpoint{}, false, fmt.Errorf("pod %s/%s has no %s container: the webhook did not inject it", pod.Namespace, pod.Name, wellknown.EnforcerContainerName)
	}
	ep := Endpoint{Namespace: pod.Namespace, Pod: pod.Name, IP: pod.Status.PodIP}
	for _, p := range enforcer.Ports {
		url := "http://" + net.JoinHostPort(ep.IP, strconv.Itoa(int(p.ContainerPort)))
		switch p.Name {
		case wellknown.HTTPPortName:
			ep.HTTP = url
		case wellknown.AdminPortName:
			ep.Admin = url
		}
	}
	for _, arg := range enforcer.Args {
		if addr, ok := strings.CutPrefix(arg, "--debug-listen="); ok && addr != "" {
			ep.Debug = "http://" + bindAddress(addr, ep.IP)
		}
	}
	ready := false
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name == wellknown.EnforcerContainerName {
			ready = cs.Ready
		}
	}
	return ep, ready && ep.IP != "", nil
}

// StatusToken is the read token the enforcers of namespace require on
// /status: the admin Secret the policy controller keeps.
func (s *Stack) StatusToken(ctx context.Context, namespace string) (string, error) {
	return s.adminToken(ctx, namespace, wellknown.AdminSecretName)
}

// WriteToken is the token the enforcers of namespace require on DELETE
// /tenant and DELETE /bans.
func (s *Stack) WriteToken(ctx context.Context, namespace string) (string, error) {
	return s.adminToken(ctx, namespace, wellknown.AdminWriteSecretName)
}

func (s *Stack) adminToken(ctx context.Context, namespace, name string) (string, error) {
	var secret corev1.Secret
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		return "", err
	}
	return string(secret.Data[wellknown.AdminTokenKey]), nil
}

// Policy reads a policy.
func (s *Stack) Policy(ctx context.Context, namespace, name string) (*v1alpha1.RateLimitPolicy, error) {
	p := &v1alpha1.RateLimitPolicy{}
	return p, s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, p)
}
