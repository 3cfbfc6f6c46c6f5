package stack

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

type fakeValues map[string]map[string]string

func (f fakeValues) SecretKey(name, key string) (string, bool, error) {
	v, ok := f["secret/"+name][key]
	return v, ok, nil
}

func (f fakeValues) ConfigMapKey(name, key string) (string, bool, error) {
	v, ok := f["configmap/"+name][key]
	return v, ok, nil
}

// The webhook's golden injected pod runs as the enforcer's command line
// with the pod's own addresses, files and identity.
func TestContainerCommandOfInjectedPod(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "inject", "testdata", "injected.golden.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var golden struct{ Pod corev1.Pod }
	g.Expect(yaml.Unmarshal(data, &golden)).To(Succeed())
	pod := &golden.Pod
	pod.Name, pod.UID = "api-7c9d8f6b5-x2k4q", "5e0c7a1e-1111-2222-3333-444455556666"

	mounts := map[string]string{"sluice-config": "/tmp/pod/volumes/sluice-config", "sluice-podinfo": "/tmp/pod/volumes/sluice-podinfo",
		"sluice-admin-token": "/tmp/pod/volumes/sluice-admin-token", "sluice-admin-write-token": "/tmp/pod/volumes/sluice-admin-write-token"}
	cmd, err := containerCommand(pod, &pod.Spec.InitContainers[0], "/bin/sluice-enforcer", "127.0.0.7", mounts, fakeValues{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Path).To(Equal("/bin/sluice-enforcer"))
	g.Expect(cmd.Args).To(Equal([]string{
		"--listen=127.0.0.7:15080",
		"--upstream=http://127.0.0.7:8080",
		"--admin-listen=127.0.0.7:15081",
		// The pod's loopback is its own IP here.
		"--debug-listen=127.0.0.7:9902",
		"--status-token-file=/tmp/pod/volumes/sluice-admin-token/token",
		"--config=/tmp/pod/volumes/sluice-config/config.json",
		"--labels-file=/tmp/pod/volumes/sluice-podinfo/labels",
		"--pod-name=api-7c9d8f6b5-x2k4q",
		"--pod-namespace=shop",
	}))
	g.Expect(cmd.Env).To(ConsistOf(
		"POD_NAME=api-7c9d8f6b5-x2k4q",
		"POD_NAMESPACE=shop",
		"POD_UID=5e0c7a1e-1111-2222-3333-444455556666",
		"SLUICE_WRITE_TOKEN_FILE=/tmp/pod/volumes/sluice-admin-write-token/token",
		// Redis is outside the pod: its address is not the pod's.
		"SLUICE_REDIS_URL=redis://redis.sluice-system:6379",
		"GOMAXPROCS=2",
		// 80% of the golden pod's 128Mi memory limit.
		"GOMEMLIMIT=107374182",
	))
}

func TestContainerEnvValueFrom(t *testing.T) {
	optional := true
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = "api-0", "shop"
	pod.Labels = map[string]string{"app": "api"}
	secretRef := func(name, key string, optional *bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: optional}}
	}
	values := fakeValues{"secret/redis": {"url": "redis://:pw@10.0.0.9:6379"}}
	tests := []struct {
		name    string
		env     []corev1.EnvVar
		want    []string
		wantErr string
	}{
		{"secret key", []corev1.EnvVar{{Name: "SLUICE_POLICY_REDIS", ValueFrom: secretRef("redis", "url", nil)}},
			[]string{"SLUICE_POLICY_REDIS=redis://:pw@10.0.0.9:6379"}, ""},
		{"optional missing secret leaves the variable unset", []corev1.EnvVar{{Name: "X", ValueFrom: secretRef("absent", "url", &optional)}},
			nil, ""},
		{"required missing secret is a config error", []corev1.EnvVar{{Name: "X", ValueFrom: secretRef("absent", "url", nil)}},
			nil, "CreateContainerConfigError"},
		{"label field", []corev1.EnvVar{{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}}},
			[]string{"APP=api"}, ""},
		{"pod IP", []corev1.EnvVar{{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
			[]string{"IP=127.0.0.9"}, ""},
		{"references to earlier variables", []corev1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-$(C)-$$(A)"}},
			[]string{"A=x", "B=x-$(C)-$(A)"}, ""},
		{"pod-local address in the environment", []corev1.EnvVar{{Name: "SLUICE_ADMIN_LISTEN", Value: ":15081"}},
			[]string{"SLUICE_ADMIN_LISTEN=127.0.0.9:15081"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := &corev1.Container{Name: "c", Env: tt.env}
			cmd, err := containerCommand(pod, c, "/bin/x", "127.0.0.9", nil, values)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cmd.Env).To(Equal(tt.want))
		})
	}
}

func TestBindPodLocal(t *testing.T) {
	tests := []struct{ arg, want string }{
		{"--listen=0.0.0.0:15080", "--listen=127.0.0.3:15080"},
		{"--listen=:15080", "--listen=127.0.0.3:15080"},
		{"--admin-listen=[::]:15081", "--admin-listen=127.0.0.3:15081"},
		{"--debug-listen=127.0.0.1:9902", "--debug-listen=127.0.0.3:9902"},
		{"--upstream=http://localhost:3000/base", "--upstream=http://127.0.0.3:3000/base"},
		{"--upstream=http://10.1.2.3:3000", "--upstream=http://10.1.2.3:3000"},
		{"--redis-url=redis://127.0.0.1:6379", "--redis-url=redis://127.0.0.1:6379"},
		{"--config=/etc/sluice/config/config.json", "--config=/etc/sluice/config/config.json"},
	}
	for _, tt := range tests {
		NewWithT(t).Expect(bindPodLocal(tt.arg, "127.0.0.3")).To(Equal(tt.want), tt.arg)
	}
}

func TestMountPathsReplaceWholeSegments(t *testing.T) {
	g := NewWithT(t)
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "etc", MountPath: "/etc/sluice"},
		{Name: "config", MountPath: "/etc/sluice/config/"},
	}}
	m := mountPaths(c, map[string]string{"etc": "/v/etc", "config": "/v/config"})
	g.Expect(m.replace("--config=/etc/sluice/config/config.json")).To(Equal("--config=/v/config/config.json"))
	g.Expect(m.replace("/etc/sluice/labels")).To(Equal("/v/etc/labels"))
	g.Expect(m.replace("/etc/sluiceother/x")).To(Equal("/etc/sluiceother/x"))
	g.Expect(m.replace("/etc/sluice")).To(Equal("/v/etc"))
}
