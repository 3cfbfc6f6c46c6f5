package stack

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OrdersImage is the image of the gRPC sample application (hack/orders):
// the Kubelet runs the binary built for it, with the container's args.
const OrdersImage = "sluice-orders:dev"

// OrdersPod is a pod of the gRPC sample application serving shop.v1.Orders
// in cleartext HTTP/2 on port, as a Deployment would create it.
func OrdersPod(namespace, name string, labels map[string]string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "orders", Image: OrdersImage,
			Args: []string{fmt.Sprintf("--listen=:%d", port)},
			Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		}}},
	}
}
