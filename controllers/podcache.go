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

package controllers

import (
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// TrimPod keeps, of a pod the manager caches, what its controllers read:
// the metadata (without managedFields), each container's name, image,
// ports, volume mounts and restart policy, the volumes' names and
// ConfigMaps, hostNetwork, and the phase and IPs. An injected pod's
// environment, arguments, probes and status of every container are most
// of its size, and the manager holds every pod of the cluster.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	trimContainers(pod.Spec.InitContainers)
	trimContainers(pod.Spec.Containers)
	pod.Spec.EphemeralContainers = nil
	for i, v := range pod.Spec.Volumes {
		pod.Spec.Volumes[i] = corev1.Volume{Name: v.Name}
		if v.ConfigMap != nil {
			pod.Spec.Volumes[i].ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: v.ConfigMap.LocalObjectReference}
		}
	}
	pod.Spec = corev1.PodSpec{
		InitContainers: pod.Spec.InitContainers, Containers: pod.Spec.Containers, Volumes: pod.Spec.Volumes,
		HostNetwork: pod.Spec.HostNetwork, NodeName: pod.Spec.NodeName,
	}
	pod.Status = corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs}
	return pod, nil
}

func trimContainers(list []corev1.Container) {
	for i, c := range list {
		list[i] = corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports, VolumeMounts: c.VolumeMounts, RestartPolicy: c.RestartPolicy}
	}
}

var _ toolscache.TransformFunc = TrimPod
