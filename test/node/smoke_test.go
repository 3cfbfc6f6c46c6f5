//go:build node

package node

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/testing/node"
)

var _ = Describe("A Deployment on the real node", Ordered, func() {
	const ns = "smoke"
	labels := map[string]string{"app": "hello"}
	var pods []corev1.Pod

	BeforeAll(func(ctx SpecContext) {
		createNamespace(ctx, ns, nil)
		Expect(cluster.Client.Create(ctx, helloDeployment(ns, labels, 2))).To(Succeed())
	})

	It("has its pods created by the controller-manager, scheduled by the scheduler and Ready on the kubelet", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, &d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(2))
		}).Should(Succeed())
		var list corev1.PodList
		Expect(cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		pods = list.Items
		Expect(pods).To(HaveLen(2))
		_, podNet, _ := net.ParseCIDR(node.PodCIDR)
		for _, p := range pods {
			Expect(p.OwnerReferences).To(ContainElement(HaveField("Kind", "ReplicaSet")), "pod %s comes from the Deployment's ReplicaSet", p.Name)
			Expect(p.Spec.NodeName).To(Equal(node.NodeName))
			Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodScheduled), HaveField("Status", corev1.ConditionTrue))))
			Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
			Expect(podNet.Contains(net.ParseIP(p.Status.PodIP))).To(BeTrue(), "pod IP %s is on the pods' bridge", p.Status.PodIP)
			Expect(p.Status.ContainerStatuses).To(ConsistOf(HaveField("Started", ptr.To(true))))
		}
		var events corev1.EventList
		Expect(cluster.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", "Scheduled"),
			HaveField("ReportingController", "default-scheduler"),
		)), "the scheduler bound the pods")
	})

	It("answers HTTP on each pod's IP", func(ctx SpecContext) {
		for _, p := range pods {
			Expect(get(fmt.Sprintf("http://%s:8080/", p.Status.PodIP))).To(Equal("hello from " + p.Name + "\n"))
		}
	})

	It("is reached through its Service's ClusterIP, by kube-proxy's rules, on both replicas", func(ctx SpecContext) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			},
		}
		Expect(cluster.Client.Create(ctx, svc)).To(Succeed())
		_, svcNet, _ := net.ParseCIDR(node.ServiceCIDR)
		Expect(svcNet.Contains(net.ParseIP(svc.Spec.ClusterIP))).To(BeTrue(), "ClusterIP %s", svc.Spec.ClusterIP)
		seen := map[string]bool{}
		Eventually(func(g Gomega) {
			body, err := get("http://" + svc.Spec.ClusterIP + "/")
			g.Expect(err).NotTo(HaveOccurred())
			seen[strings.TrimSpace(strings.TrimPrefix(body, "hello from "))] = true
			g.Expect(seen).To(HaveLen(2))
		}).Should(Succeed())
		for _, p := range pods {
			Expect(seen).To(HaveKey(p.Name))
		}
	})
})

func helloDeployment(ns string, labels map[string]string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name:            "hello",
						Image:           node.HelloImage,
						ImagePullPolicy: corev1.PullNever,
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}

// get fetches url and returns the body of a 200 answer.
func get(url string) (string, error) {
	// A new connection each time: kube-proxy picks a backend per
	// connection.
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}
