package stack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

// NodeName is the Node the stand-in kubelet registers. A pod bound to it
// (spec.nodeName) is reached by the API server's pods/portforward through
// the kubelet's streaming server, as kubectl port-forward does in a
// cluster.
const NodeName = "stand-in-node"

// streamingServer serves the kubelet's /portForward/{namespace}/{pod}
// over TLS on loopback, with the kubelet's own streaming library: a
// forwarded connection is a TCP connection to the pod's IP and port. The
// API server, started without --kubelet-certificate-authority, does not
// check the kubelet's certificate, as in a cluster without one.
type streamingServer struct {
	kubelet *Kubelet
	server  *httptest.Server
}

func startStreamingServer(k *Kubelet) *streamingServer {
	s := &streamingServer{kubelet: k}
	mux := http.NewServeMux()
	mux.HandleFunc("/portForward/{namespace}/{pod}", func(w http.ResponseWriter, r *http.Request) {
		opts, err := portforward.NewV4Options(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		portforward.ServePortForward(w, r, s, r.PathValue("namespace")+"/"+r.PathValue("pod"), "", opts,
			4*time.Hour, 30*time.Second, portforward.SupportedProtocols)
	})
	s.server = httptest.NewUnstartedServer(mux)
	s.server.StartTLS()
	return s
}

// PortForward copies between stream and port of the pod named
// "namespace/name".
func (s *streamingServer) PortForward(ctx context.Context, name string, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	namespace, pod, _ := strings.Cut(name, "/")
	ip := ""
	for _, p := range s.kubelet.Pods() {
		if p.Namespace == namespace && p.Name == pod {
			ip = p.IP
		}
	}
	if ip == "" {
		return fmt.Errorf("pod %s does not run here", name)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer conn.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(conn, stream)
		if c, ok := conn.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
	})
	_, err = io.Copy(stream, conn)
	wg.Wait()
	return err
}

func (s *streamingServer) close() { s.server.Close() }

// registerNode creates the Node whose kubelet endpoint is the streaming
// server: the API server finds a pod's kubelet through its node's
// address and kubelet port.
func (s *Stack) registerNode(ctx context.Context, addr string) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName}}
	if err := s.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("create node %s: %w", NodeName, err)
	}
	node.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
		Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
	}
	if err := s.Client.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("report node %s: %w", NodeName, err)
	}
	return nil
}
