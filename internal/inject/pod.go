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
	"fmt"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// Paths inside the enforcer container. The config and the labels are two
// volumes in two directories: nesting one mount inside the other read-only
// volume fails, and subPath mounts would not see updates.
const (
	configVolumeName     = "sluice-config"
	podInfoVolumeName    = "sluice-podinfo"
	adminTokenVolumeName = "sluice-admin-token"
	// WriteTokenVolumeName is the write token's volume: kubectl sluice
	// tells by it whether the pod's enforcer requires the write token.
	WriteTokenVolumeName = "sluice-admin-write-token"
	configDir            = "/etc/sluice/config"
	podInfoDir           = "/etc/sluice/podinfo"
	adminTokenDir        = "/etc/sluice/admin"
	writeTokenDir        = "/etc/sluice/admin-write"
	// noAPITokenVolumeName is an empty directory over the service account
	// token's path: the enforcer never calls the Kubernetes API, and with
	// a mount there the ServiceAccount admission plugin gives it no token.
	noAPITokenVolumeName = "sluice-no-api-token"
	serviceAccountDir    = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// Apply adds the enforcer to a pod that d says to inject: a
// native sidecar (an init container that restarts always, so it starts
// before the application and stops after it), its five volumes, and the
// annotation and label that mark the pod. The application's containers are
// left as they are: users point their Service at the sluice-http port.
func Apply(pod *corev1.Pod, d Decision, sidecar *EnforcerSidecar) {
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, enforcerContainerFor(pod, d, sidecar))
	addDrainHook(pod, sidecar)
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: configVolumeName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: wellknown.ConfigMapName},
			// The pod starts even before the policy controller wrote the
			// ConfigMap; the enforcer loads it when it appears.
			Optional: new(true),
		}}},
		corev1.Volume{Name: podInfoVolumeName, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}},
		}}},
		// The /status token, by reference: the pod spec holds no secret.
		// Optional like the ConfigMap; the kubelet adds the file when the
		// policy controller has written the Secret, and the enforcer reads it.
		corev1.Volume{Name: adminTokenVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: wellknown.AdminSecretName,
			Items:      []corev1.KeyToPath{{Key: wellknown.AdminTokenKey, Path: wellknown.AdminTokenKey}},
			Optional:   new(true),
		}}},
		// The write token (resets, ban lifts), in a Secret of its own.
		corev1.Volume{Name: WriteTokenVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: wellknown.AdminWriteSecretName,
			Items:      []corev1.KeyToPath{{Key: wellknown.AdminTokenKey, Path: wellknown.AdminTokenKey}},
			Optional:   new(true),
		}}},
		corev1.Volume{Name: noAPITokenVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: new(resource.MustParse("4Ki")),
		}}},
	)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[wellknown.InjectedAnnotation] = sidecar.Image
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[wellknown.EnforcerLabel] = wellknown.EnforcerLabelValue
}

func enforcerContainerFor(pod *corev1.Pod, d Decision, sidecar *EnforcerSidecar) corev1.Container {
	env := []corev1.EnvVar{
		fieldEnv("POD_NAME", "metadata.name"),
		fieldEnv("POD_NAMESPACE", "metadata.namespace"),
		fieldEnv("POD_UID", "metadata.uid"),
	}
	// In the environment, not a flag: an enforcer image older than the
	// write token ignores the variable where it would refuse the flag.
	env = append(env, corev1.EnvVar{Name: "SLUICE_WRITE_TOKEN_FILE", Value: path.Join(writeTokenDir, wellknown.AdminTokenKey)})
	env = append(env, redisEnv(d.Selected, sidecar)...)
	if sidecar.MaxProcs > 0 {
		env = append(env, corev1.EnvVar{Name: "GOMAXPROCS", Value: strconv.Itoa(sidecar.MaxProcs)})
	}
	// At 80% of the container's limit the garbage collector works harder,
	// leaving room for goroutine stacks and what it has not collected; and
	// the enforcer derives from it how much it may hold and sheds new work
	// before the kernel would kill it.
	if limit, ok := sidecar.Resources.Limits[corev1.ResourceMemory]; ok && limit.Value() > 0 {
		env = append(env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: strconv.FormatInt(limit.Value()*8/10, 10)})
	}
	args := []string{
		fmt.Sprintf("--listen=0.0.0.0:%d", sidecar.HTTPPort),
		fmt.Sprintf("--upstream=http://127.0.0.1:%d", d.UpstreamPort),
		fmt.Sprintf("--admin-listen=0.0.0.0:%d", sidecar.AdminPort),
		"--debug-listen=" + debugListen(pod),
		"--status-token-file=" + path.Join(adminTokenDir, wellknown.AdminTokenKey),
		"--config=" + path.Join(configDir, wellknown.ConfigKey),
		"--labels-file=" + path.Join(podInfoDir, "labels"),
		"--pod-name=$(POD_NAME)",
		"--pod-namespace=$(POD_NAMESPACE)",
	}
	// The configuration says how each policy forwards; the flag is how to
	// forward before it is loaded, or once no policy selects the pod. It is
	// left out for HTTP1, the enforcer's default, so that HTTP/1.1 pods run
	// with enforcer images older than the flag.
	if d.UpstreamProtocol != "" && d.UpstreamProtocol != v1alpha1.DefaultUpstreamProtocol {
		args = append(args, "--upstream-protocol="+string(d.UpstreamProtocol))
	}
	return corev1.Container{
		Name:            wellknown.EnforcerContainerName,
		Image:           sidecar.Image,
		ImagePullPolicy: sidecar.ImagePullPolicy,
		RestartPolicy:   new(corev1.ContainerRestartPolicyAlways),
		Args:            append(args, sidecar.ExtraArgs...),
		Ports: []corev1.ContainerPort{
			{Name: wellknown.HTTPPortName, ContainerPort: sidecar.HTTPPort, Protocol: corev1.ProtocolTCP},
			{Name: wellknown.AdminPortName, ContainerPort: sidecar.AdminPort, Protocol: corev1.ProtocolTCP},
		},
		Env:       env,
		Resources: *sidecar.Resources.DeepCopy(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: configVolumeName, MountPath: configDir, ReadOnly: true},
			{Name: podInfoVolumeName, MountPath: podInfoDir, ReadOnly: true},
			{Name: adminTokenVolumeName, MountPath: adminTokenDir, ReadOnly: true},
			{Name: WriteTokenVolumeName, MountPath: writeTokenDir, ReadOnly: true},
			{Name: noAPITokenVolumeName, MountPath: serviceAccountDir, ReadOnly: true},
		},
		// The application starts once the enforcer serves, whether or not
		// its configuration exists yet; /readyz then gates traffic.
		StartupProbe:   adminProbe("/healthz", 1, 30),
		LivenessProbe:  adminProbe("/healthz", 10, 3),
		ReadinessProbe: adminProbe("/readyz", 5, 2),
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             new(true),
			RunAsUser:                new(sidecar.RunAsUser),
			RunAsGroup:               new(sidecar.RunAsUser),
			ReadOnlyRootFilesystem:   new(true),
			AllowPrivilegeEscalation: new(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// debugListen is the enforcer's loopback debug address, or "" (no debug
// listener) when a container of the pod declares the debug port: the
// sidecar starts first, and would take the port from the application.
func debugListen(pod *corev1.Pod) string {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.ContainerPort == wellknown.EnforcerDebugPort {
					return ""
				}
			}
		}
	}
	return fmt.Sprintf("127.0.0.1:%d", wellknown.EnforcerDebugPort)
}

// EnforcerDrainPath is the enforcer's admin endpoint that the application
// containers' preStop hook calls (sluice-enforcer's DrainPath).
const EnforcerDrainPath = "/drain"

// addDrainHook gives each application container without a preStop hook of
// its own one that calls the enforcer's /drain. The kubelet stops a native
// sidecar only after the application, so this hook is how the enforcer
// learns that the pod is going: it closes its client connections after
// their response and waits --drain-delay, while the pod leaves its
// Services' endpoints, before the kubelet stops the application. Without
// it a rolling restart fails requests (refused connections and 502s).
func addDrainHook(pod *corev1.Pod, sidecar *EnforcerSidecar) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			continue
		}
		if c.Lifecycle == nil {
			c.Lifecycle = &corev1.Lifecycle{}
		}
		// By number: a hook's named port is looked up in its own
		// container, which does not declare sluice-admin.
		c.Lifecycle.PreStop = &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: EnforcerDrainPath, Port: intstr.FromInt32(sidecar.AdminPort),
		}}
	}
}

func fieldEnv(name, fieldPath string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fieldPath}}}
}

func adminProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString(wellknown.AdminPortName),
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   1,
		FailureThreshold: failures,
	}
}

// redisEnv is the enforcer's Redis settings for the selected policies:
// each policy's storage Secret under the variable the compiled config
// names, and the default Redis when some policy uses it. Secret values are
// referenced, never copied into the pod spec.
func redisEnv(selected []*v1alpha1.RateLimitPolicy, sidecar *EnforcerSidecar) []corev1.EnvVar {
	var env []corev1.EnvVar
	if needsDefaultRedis(selected) != nil {
		switch {
		case sidecar.DefaultRedisSecret != nil:
			env = append(env, corev1.EnvVar{Name: wellknown.DefaultRedisURLEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sidecar.DefaultRedisSecret.DeepCopy()}})
		case sidecar.DefaultRedisURL != "":
			env = append(env, corev1.EnvVar{Name: wellknown.DefaultRedisURLEnv, Value: sidecar.DefaultRedisURL})
		}
	}
	for _, p := range selected {
		ref := p.Spec.StorageSecret()
		if ref == nil {
			continue
		}
		key := ref.Key
		if key == "" {
			key = v1alpha1.DefaultStorageSecretKey
		}
		// Optional: a missing Secret must not keep the application from
		// starting; the policy reports StorageSecretMissing meanwhile.
		env = append(env, corev1.EnvVar{Name: compile.RedisURLEnv(p.Name), ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
				Key:                  key,
				Optional:             new(true),
			},
		}})
	}
	return env
}
