package stack

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podStatus is the status the kubelet reports for a running pod: phase
// Running, the pod's IP, a status per container and the Ready conditions.
// The application's containers are always ready; a sidecar is ready when
// its readiness probe passes.
func podStatus(pod *corev1.Pod, rt *podRuntime) corev1.PodStatus {
	started := metav1.NewTime(rt.startedAt)
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: started}
		if !ok {
			c.Status = corev1.ConditionFalse
		}
		// Keep the transition time of a condition that did not change.
		for _, old := range pod.Status.Conditions {
			if old.Type == t && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	ready := rt.ready()
	st := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    "127.0.0.1",
		HostIPs:   []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP:     rt.ip,
		PodIPs:    []corev1.PodIP{{IP: rt.ip}},
		StartTime: &started,
		QOSClass:  corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers, true),
			cond(corev1.PodInitialized, true),
			cond(corev1.ContainersReady, ready),
			cond(corev1.PodReady, ready),
			cond(corev1.PodScheduled, true),
		},
	}
	if pod.Status.QOSClass != "" {
		st.QOSClass = pod.Status.QOSClass
	}
	sidecars := map[string]*sidecar{}
	for _, s := range rt.sidecars {
		sidecars[s.spec.Name] = s
	}
	statuses := func(list []corev1.Container) []corev1.ContainerStatus {
		var out []corev1.ContainerStatus
		for _, c := range list {
			cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: new(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
			if s, ok := sidecars[c.Name]; ok {
				cs.Ready, cs.RestartCount = s.ready, s.restarts
				*cs.Started = s.proc != nil
				if s.proc != nil {
					cs.State.Running.StartedAt = metav1.NewTime(s.startedAt)
				} else {
					cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonOf(s.waiting), Message: s.waiting}}
				}
			}
			out = append(out, cs)
		}
		return out
	}
	st.InitContainerStatuses = statuses(pod.Spec.InitContainers)
	st.ContainerStatuses = statuses(pod.Spec.Containers)
	return st
}

// reasonOf is the reason before the colon of a waiting message.
func reasonOf(waiting string) string {
	if waiting == "" {
		return "ContainerCreating"
	}
	reason, _, _ := strings.Cut(waiting, ":")
	return reason
}

// statusChanged reports whether want says something that got does not:
// phase, IP, readiness, or a container's state and restarts. Timestamps
// alone do not count.
func statusChanged(got, want *corev1.PodStatus) bool {
	if got.Phase != want.Phase || got.PodIP != want.PodIP || len(got.Conditions) != len(want.Conditions) {
		return true
	}
	for i := range want.Conditions {
		if got.Conditions[i].Type != want.Conditions[i].Type || got.Conditions[i].Status != want.Conditions[i].Status {
			return true
		}
	}
	return containersChanged(got.InitContainerStatuses, want.InitContainerStatuses) ||
		containersChanged(got.ContainerStatuses, want.ContainerStatuses)
}

func containersChanged(got, want []corev1.ContainerStatus) bool {
	if len(got) != len(want) {
		return true
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Ready != w.Ready || g.RestartCount != w.RestartCount ||
			(g.State.Running == nil) != (w.State.Running == nil) {
			return true
		}
	}
	return false
}
