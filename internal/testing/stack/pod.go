package stack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Container restarts back off from restartBackoff up to maxRestartBackoff,
// as the kubelet does (in seconds rather than minutes, for tests).
const (
	restartBackoff    = 500 * time.Millisecond
	maxRestartBackoff = 4 * time.Second
	probeTimeout      = 500 * time.Millisecond
	stopGrace         = 5 * time.Second
)

// podRuntime is what runs for one pod: its loopback IP, volumes, the
// application (an upstream) and the sidecar processes.
type podRuntime struct {
	key       types.NamespacedName
	uid       types.UID
	ip        string
	dir       string
	startedAt time.Time
	app       *upstream
	sidecars  []*sidecar
}

// sidecar is one container that runs as a local process: a container whose
// image the stack has a binary for.
type sidecar struct {
	spec      corev1.Container
	bin       string
	proc      *Process
	restarts  int32
	nextStart time.Time
	// waiting is why the container does not run ("CrashLoopBackOff: ..."),
	// empty while it runs.
	waiting   string
	ready     bool
	startedAt time.Time
}

// newPodRuntime prepares a pod: its directory and IP, and starts its
// application on the ports its other containers declare.
func newPodRuntime(pod *corev1.Pod, dir, ip string, images map[string]string) (*podRuntime, error) {
	rt := &podRuntime{
		key: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID,
		ip: ip, dir: dir, startedAt: time.Now(),
	}
	if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o755); err != nil {
		return nil, err
	}
	var appPorts []int32
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if bin, ok := images[c.Image]; ok {
				rt.sidecars = append(rt.sidecars, &sidecar{spec: c, bin: bin})
				continue
			}
			for _, p := range c.Ports {
				if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
					appPorts = append(appPorts, p.ContainerPort)
				}
			}
		}
	}
	app, err := startUpstream(pod.Name, ip, appPorts)
	if err != nil {
		return nil, fmt.Errorf("start the application of pod %s on %s: %w", rt.key, ip, err)
	}
	rt.app = app
	return rt, nil
}

// volumeDir is where volume name of the pod is.
func (rt *podRuntime) volumeDir(name string) string {
	return filepath.Join(rt.dir, "volumes", name)
}

// runSidecars starts the sidecars that are not running and may start
// (restart backoff), and probes the readiness of those that run.
func (rt *podRuntime) runSidecars(ctx context.Context, pod *corev1.Pod, values valueSource, probe *http.Client) {
	mounts := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		mounts[v.Name] = rt.volumeDir(v.Name)
	}
	for _, s := range rt.sidecars {
		if s.proc != nil && !s.proc.Running() {
			s.restarts++
			s.ready = false
			s.waiting = fmt.Sprintf("CrashLoopBackOff: %v", s.proc.ExitErr())
			s.proc = nil
			s.nextStart = time.Now().Add(backoff(s.restarts))
		}
		if s.proc == nil && !time.Now().Before(s.nextStart) {
			if err := rt.start(pod, s, mounts, values); err != nil {
				s.waiting = "CreateContainerConfigError: " + err.Error()
				s.nextStart = time.Now().Add(backoff(s.restarts + 1))
			}
		}
		if s.proc != nil {
			s.ready = rt.probe(ctx, probe, s)
		}
	}
}

func backoff(restarts int32) time.Duration {
	d := restartBackoff
	for i := int32(1); i < restarts && d < maxRestartBackoff; i++ {
		d *= 2
	}
	return min(d, maxRestartBackoff)
}

func (rt *podRuntime) start(pod *corev1.Pod, s *sidecar, mounts map[string]string, values valueSource) error {
	c, err := containerCommand(pod, &s.spec, s.bin, rt.ip, mounts, values)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.Path, c.Args...)
	// The container's environment only, never this process's: an empty,
	// non-nil list.
	cmd.Env = append(make([]string, 0, len(c.Env)), c.Env...)
	cmd.Dir = rt.dir
	p, err := startProcess(s.spec.Name, filepath.Join(rt.dir, s.spec.Name+".log"), cmd)
	if err != nil {
		return err
	}
	s.proc, s.waiting, s.startedAt = p, "", time.Now()
	return nil
}

// probe runs the container's readiness probe once; a container without
// one is ready once it runs.
func (rt *podRuntime) probe(ctx context.Context, client *http.Client, s *sidecar) bool {
	p := s.spec.ReadinessProbe
	if p == nil || p.HTTPGet == nil {
		return true
	}
	port := p.HTTPGet.Port.IntValue()
	if port == 0 {
		for _, cp := range s.spec.Ports {
			if cp.Name == p.HTTPGet.Port.String() {
				port = int(cp.ContainerPort)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(rt.ip, strconv.Itoa(port)) + p.HTTPGet.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// stop ends the sidecars (SIGTERM, then SIGKILL after the grace period)
// and the application, and removes the pod's directory.
func (rt *podRuntime) stop() {
	for _, s := range rt.sidecars {
		if s.proc != nil {
			s.proc.Stop(stopGrace)
		}
	}
	rt.app.stop()
	_ = os.RemoveAll(rt.dir)
}

// ready is whether every container is ready: the application always is.
func (rt *podRuntime) ready() bool {
	for _, s := range rt.sidecars {
		if !s.ready {
			return false
		}
	}
	return true
}
