package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/wellknown"
)

// keepRunning leaves the node up (make demo-node KEEP=1) and says how to
// reach it and how to stop it, then waits for Ctrl-C or SIGTERM.
func (d *demo) keepRunning(ctx context.Context, failed bool) {
	c := d.cluster
	if failed {
		section("The node keeps running (KEEP=1) so that you can look at what failed.")
	} else {
		section("The node keeps running (KEEP=1): Sluice, Redis and the demo's application.")
	}
	fmt.Println("   In a root shell (sudo -s: the node's files are root's), from the checkout:")
	fmt.Println()
	fmt.Printf("   export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Printf("   export PATH=%s:$PATH   # kubectl and helm\n", d.toolPath())
	fmt.Println("   kubectl get rlp,pods -n demo -o wide")
	if d.serviceURL != "" {
		fmt.Printf("   curl -i -H 'X-API-Key: me' %s   # the Service demo/public-api, through kube-proxy\n", d.serviceURL)
	}
	fmt.Printf("   TOKEN=$(kubectl get secret -n demo %s -o jsonpath='{.data.%s}' | base64 -d)\n",
		wellknown.AdminSecretName, wellknown.AdminTokenKey)
	fmt.Println()
	fmt.Printf("   kube-apiserver     %s\n", c.Config.Host)
	if d.serviceURL != "" {
		fmt.Printf("   demo/public-api    %s (Service, ClusterIP)\n", d.serviceURL)
	}
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace("demo")); err == nil {
		for _, p := range pods.Items {
			proxy, admin := enforcerPorts(&p)
			if p.Status.PodIP == "" || proxy == 0 {
				continue
			}
			fmt.Printf("   pod %s   proxy http://%s:%d/   admin http://%s:%d/status (curl -H \"Authorization: Bearer $TOKEN\")\n",
				p.Name, p.Status.PodIP, proxy, p.Status.PodIP, admin)
		}
	}
	images := slices.Sorted(maps.Values(c.Images))
	fmt.Printf("\n   Images on the node, imported (it pulls none): %s\n", strings.Join(images, ", "))
	fmt.Println("   docs/first-policy.md runs on this node as its top says: Sluice is installed already,")
	fmt.Printf("   and hello.yaml takes image %s, the demo's application, in place of nginx.\n", c.Images["sluice-echo.tar"])
	fmt.Printf("   Logs: %s (kubelet.log, containerd/containerd.log, kube-*.log), removed when the node stops.\n", c.Dir)
	fmt.Println()
	fmt.Printf("Ctrl-C here, or kill %d (SIGTERM), stops it all and restores the host.\n", os.Getpid())
	<-ctx.Done()
	fmt.Println()
}

// enforcerPorts are the injected enforcer's proxy and admin ports in p.
func enforcerPorts(p *corev1.Pod) (proxy, admin int32) {
	for _, c := range p.Spec.InitContainers {
		for _, port := range c.Ports {
			switch port.Name {
			case wellknown.HTTPPortName:
				proxy = port.ContainerPort
			case wellknown.AdminPortName:
				admin = port.ContainerPort
			}
		}
	}
	return proxy, admin
}
