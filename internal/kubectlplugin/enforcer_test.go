package kubectlplugin

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// enforcerPod is a pod with an enforcer that mounts the volumes named.
func enforcerPod(name string, volumes ...string) *corev1.Pod {
	c := corev1.Container{Name: wellknown.EnforcerContainerName}
	for _, v := range volumes {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v})
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{c}}}
	pod.Name = name
	return pod
}

func TestResetAndUnbanUseTheWriteToken(t *testing.T) {
	current := enforcerPod("api-new", "sluice-admin-token", inject.WriteTokenVolumeName)
	older := enforcerPod("api-old", "sluice-admin-token")
	cases := []struct {
		name    string
		pod     *corev1.Pod
		access  debugapi.Access
		secret  string
		warning string
	}{
		{"reads", current, debugapi.Read, wellknown.AdminSecretName, ""},
		{"writes", current, debugapi.Write, wellknown.AdminWriteSecretName, ""},
		{"reads, pod injected before the write token", older, debugapi.Read, wellknown.AdminSecretName, ""},
		{"writes, pod injected before the write token", older, debugapi.Write, wellknown.AdminSecretName, "pod api-old was injected before the write token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var errOut bytes.Buffer
			o := &Options{IOStreams: genericiooptions.IOStreams{ErrOut: &errOut}}
			g.Expect(o.tokenSecret(tc.pod, tc.access)).To(Equal(tc.secret))
			if tc.warning == "" {
				g.Expect(errOut.String()).To(BeEmpty())
			} else {
				g.Expect(errOut.String()).To(ContainSubstring(tc.warning))
			}
		})
	}
}
