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

package inject

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// testSidecar is the sidecar configuration of the golden files.
func testSidecar() EnforcerSidecar {
	return EnforcerSidecar{
		Image:           "sluice-enforcer:test",
		ImagePullPolicy: corev1.PullIfNotPresent,
		HTTPPort:        15080,
		AdminPort:       15081,
		RunAsUser:       65532,
		MaxProcs:        DefaultEnforcerMaxProcs,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("48Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		DefaultRedisURL: "redis://redis.sluice-system:6379",
	}
}

// goldenDecision is the decision as a golden file shows it.
type goldenDecision struct {
	Inject       bool     `json:"inject"`
	Reason       string   `json:"reason"`
	Message      string   `json:"message"`
	Selected     []string `json:"selected,omitempty"`
	UpstreamPort int32    `json:"upstreamPort,omitempty"`
}

// golden is a case's expected output: the decision, and the pod as the
// webhook returns it when it injects.
type golden struct {
	Decision goldenDecision `json:"decision"`
	Pod      *corev1.Pod    `json:"pod,omitempty"`
}

// TestInjectionGolden runs each testdata/<case>.yaml (a Pod, then the
// RateLimitPolicies of its namespace) through the decision and the
// mutation, and compares with <case>.golden.yaml. go test -update rewrites
// the golden files.
func TestInjectionGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, c := range cases {
		if !strings.HasSuffix(c, ".golden.yaml") {
			inputs = append(inputs, c)
		}
	}
	if len(inputs) == 0 {
		t.Fatal("no cases in testdata")
	}
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".yaml")
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			pod, policies := readCase(g, input)
			sidecar := testSidecar()
			original := pod.DeepCopy()

			d := Decide(pod, policies, &sidecar)
			out := golden{Decision: goldenDecision{Inject: d.Inject, Reason: d.Reason, Message: d.Message, UpstreamPort: d.UpstreamPort}}
			for _, p := range d.Selected {
				out.Decision.Selected = append(out.Decision.Selected, p.Name)
			}
			if d.Inject {
				Apply(pod, d, &sidecar)
				out.Pod = pod
			} else {
				g.Expect(pod).To(Equal(original), "a pod that is not injected is not touched")
			}
			got, err := yaml.Marshal(out)
			g.Expect(err).NotTo(HaveOccurred())

			goldenPath := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				g.Expect(os.WriteFile(goldenPath, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(goldenPath)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./internal/inject -run TestInjectionGolden -update to create it")
			g.Expect(string(got)).To(Equal(string(want)))

			if d.Inject {
				again := Decide(pod, policies, &sidecar)
				g.Expect(again.Inject).To(BeFalse(), "re-admission does not inject twice")
				g.Expect(again.Reason).To(Equal(ReasonAlreadyInjected))
				g.Expect(MountsWriteToken(pod)).To(BeTrue(), "kubectl sluice finds the write token mounted")
			}
			g.Expect(MountsWriteToken(original)).To(BeFalse())
		})
	}
}

// readCase decodes a Pod followed by RateLimitPolicies.
func readCase(g *WithT, path string) (*corev1.Pod, []v1alpha1.RateLimitPolicy) {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()

	var pod *corev1.Pod
	var policies []v1alpha1.RateLimitPolicy
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		g.Expect(err).NotTo(HaveOccurred(), "decode a document of %s", path)
		switch o := obj.(type) {
		case *corev1.Pod:
			pod = o
		case *v1alpha1.RateLimitPolicy:
			policies = append(policies, *o)
		default:
			g.Expect(o).To(BeNil(), "only Pods and RateLimitPolicies belong in %s", path)
		}
	}
	g.Expect(pod).NotTo(BeNil(), "%s has no Pod", path)
	return pod, policies
}

func TestRedisEnv(t *testing.T) {
	withStorage := &v1alpha1.RateLimitPolicy{}
	withStorage.Name = "public-api"
	withStorage.Spec.Storage = &v1alpha1.Storage{SecretRef: &v1alpha1.SecretKeyReference{Name: "redis", Key: "url"}}
	withoutStorage := &v1alpha1.RateLimitPolicy{}
	withoutStorage.Name = "login"
	secret := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sluice-redis"}, Key: "url"}

	tests := []struct {
		name     string
		selected []*v1alpha1.RateLimitPolicy
		sidecar  EnforcerSidecar
		want     []corev1.EnvVar
	}{{
		name:     "default Redis from a Secret wins over the URL",
		selected: []*v1alpha1.RateLimitPolicy{withoutStorage},
		sidecar:  EnforcerSidecar{DefaultRedisSecret: secret, DefaultRedisURL: "redis://redis:6379"},
		want:     []corev1.EnvVar{{Name: wellknown.DefaultRedisURLEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secret}}},
	}, {
		name:     "default Redis URL without a password as a value",
		selected: []*v1alpha1.RateLimitPolicy{withoutStorage},
		sidecar:  EnforcerSidecar{DefaultRedisURL: "redis://redis:6379"},
		want:     []corev1.EnvVar{{Name: wellknown.DefaultRedisURLEnv, Value: "redis://redis:6379"}},
	}, {
		name:     "no default Redis when every policy names its storage",
		selected: []*v1alpha1.RateLimitPolicy{withStorage},
		sidecar:  EnforcerSidecar{DefaultRedisURL: "redis://redis:6379"},
		want: []corev1.EnvVar{{Name: "SLUICE_REDIS_URL_PUBLIC_API", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: "url", Optional: new(true)}}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(redisEnv(tt.selected, &tt.sidecar)).To(Equal(tt.want))
		})
	}
}

func TestNoDefaultRedis(t *testing.T) {
	g := NewWithT(t)
	p := v1alpha1.RateLimitPolicy{}
	p.Name = "login"
	p.Spec.Selector.MatchLabels = map[string]string{"app": "api"}
	p.Spec.UpstreamPort = 8080
	pod := &corev1.Pod{}
	pod.Labels = map[string]string{"app": "api"}
	sidecar := testSidecar()
	sidecar.DefaultRedisURL = ""

	d := Decide(pod, []v1alpha1.RateLimitPolicy{p}, &sidecar)
	g.Expect(d.Inject).To(BeFalse())
	g.Expect(d.Reason).To(Equal(ReasonNoDefaultRedis))
	g.Expect(d.Message).To(ContainSubstring("policy login has no spec.storage"))
}

// TestEnforcerExtraArgs: the limits an operator sets (--enforcer-arg) come
// after the injector's own flags, so that they win, and change nothing else.
func TestEnforcerExtraArgs(t *testing.T) {
	g := NewWithT(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-0", Namespace: "shop"}}
	sidecar := testSidecar()
	plain := enforcerContainerFor(pod, Decision{Inject: true, UpstreamPort: 8080}, &sidecar)
	sidecar.ExtraArgs = []string{"--body-timeout=10m"}
	tuned := enforcerContainerFor(pod, Decision{Inject: true, UpstreamPort: 8080}, &sidecar)
	g.Expect(tuned.Args).To(Equal(append(plain.Args, "--body-timeout=10m")))
}

// The enforcer runs as many threads of Go code as the sidecar says, and as
// Go decides when it says 0.
func TestEnforcerMaxProcs(t *testing.T) {
	g := NewWithT(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-0", Namespace: "shop"}}
	sidecar := testSidecar()
	g.Expect(enforcerContainerFor(pod, Decision{Inject: true, UpstreamPort: 8080}, &sidecar).Env).To(
		ContainElement(corev1.EnvVar{Name: "GOMAXPROCS", Value: "2"}))
	sidecar.MaxProcs = 0
	g.Expect(enforcerContainerFor(pod, Decision{Inject: true, UpstreamPort: 8080}, &sidecar).Env).NotTo(
		ContainElement(HaveField("Name", "GOMAXPROCS")))
}

// TestDecideInNamespace: in a namespace without the injection label the
// webhook never sees a pod, so a selected pod without an enforcer is
// explained by the namespace, unless it opts out or already runs one.
func TestDecideInNamespace(t *testing.T) {
	p := v1alpha1.RateLimitPolicy{}
	p.Name = "login"
	p.Spec.Selector.MatchLabels = map[string]string{"app": "api"}
	p.Spec.UpstreamPort = 8080
	sidecar := testSidecar()
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-0", Namespace: "shop", Labels: map[string]string{"app": "api"}}}
		if mutate != nil {
			mutate(pod)
		}
		return pod
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		enabled bool
		want    string
	}{
		{"enabled namespace", pod(nil), true, ReasonInjected},
		{"namespace not enabled", pod(nil), false, ReasonNamespaceNotEnabled},
		{"opted out", pod(func(p *corev1.Pod) { p.Annotations = map[string]string{wellknown.InjectAnnotation: "false"} }), false, ReasonOptedOut},
		{"already injected", pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: wellknown.EnforcerContainerName}}
		}), false, ReasonAlreadyInjected},
		{"not selected", pod(func(p *corev1.Pod) { p.Labels = nil }), false, ReasonNotSelected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := DecideInNamespace(tt.pod, []v1alpha1.RateLimitPolicy{p}, &sidecar, tt.enabled)
			g.Expect(d.Reason).To(Equal(tt.want))
			if tt.want != ReasonNotSelected {
				g.Expect(d.Selected).To(HaveExactElements(HaveField("Name", "login")))
			}
		})
	}
}
