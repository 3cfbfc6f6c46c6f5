package stack

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncInterval is how often the kubelet checks its pods without an event:
// restarts, readiness probes.
const syncInterval = 500 * time.Millisecond

// Kubelet plays the kubelet's part for pods on one machine: each pod gets a
// loopback IP and runs there. Containers whose image the stack has a binary
// for (the injected enforcer) run as processes exactly as their spec says
// (command, args, env with valueFrom resolved, volume mounts as local
// directories kept up to date like ConfigMap volumes); the other containers
// are the application, which a small upstream stands in for on their ports.
// The pod's status reports the IP, the containers and readiness.
type Kubelet struct {
	client client.Client
	cache  cache.Cache
	images map[string]string
	dir    string
	ips    *ipAllocator
	probe  *http.Client
	log    io.Writer

	mu   sync.Mutex
	pods map[types.UID]*podRuntime
	// held are pods whose ConfigMap volumes are not updated for now.
	held map[types.NamespacedName]bool
	// stopped is set by stopAll: no pod starts after it.
	stopped bool
	kick    chan struct{}
}

// PodInfo is what runs for one pod.
type PodInfo struct {
	Namespace, Name string
	IP              string
	Ready           bool
	// Sidecars are the running processes by container name.
	Sidecars map[string]SidecarInfo
}

// SidecarInfo is one sidecar process.
type SidecarInfo struct {
	Pid      int
	Restarts int32
	Ready    bool
	LogPath  string
	// Ports are the container's ports by name.
	Ports map[string]int32
}

func newKubelet(cfg *rest.Config, scheme *runtime.Scheme, dir string, images map[string]string, ips *ipAllocator, log io.Writer) (*Kubelet, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 5 * time.Second
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.DisableKeepAlives = true
	return &Kubelet{
		client: c, cache: ca, images: images, dir: dir, ips: ips, log: log,
		probe: &http.Client{Transport: transport, Timeout: probeTimeout},
		pods:  map[types.UID]*podRuntime{}, held: map[types.NamespacedName]bool{}, kick: make(chan struct{}, 1),
	}, nil
}

// start starts watching and returns once the watches have synced; the
// kubelet then runs until ctx ends.
func (k *Kubelet) start(ctx context.Context) error {
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.trigger() },
		UpdateFunc: func(any, any) { k.trigger() },
		DeleteFunc: func(any) { k.trigger() },
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.ConfigMap{}, &corev1.Secret{}} {
		inf, err := k.cache.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	go func() { _ = k.cache.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !k.cache.WaitForCacheSync(syncCtx) {
		return fmt.Errorf("the kubelet's watches did not sync")
	}
	go k.run(ctx)
	return nil
}

func (k *Kubelet) trigger() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *Kubelet) run(ctx context.Context) {
	ticker := time.NewTicker(syncInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		case <-ticker.C:
		}
		k.sync(ctx)
	}
}

// sync brings what runs in line with the pods in the cache.
func (k *Kubelet) sync(ctx context.Context) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	var pods corev1.PodList
	if err := k.cache.List(ctx, &pods); err != nil {
		k.logf("list pods: %v", err)
		return
	}
	// Oldest first, so pods get their addresses in the order they were created.
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	active := map[types.UID]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		active[pod.UID] = true
		rt := k.pods[pod.UID]
		if rt == nil {
			var err error
			if rt, err = k.admit(pod); err != nil {
				k.logf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
				continue
			}
			k.pods[pod.UID] = rt
		}
		k.writeVolumes(ctx, pod, rt)
		rt.runSidecars(ctx, pod, &namespaceValues{ctx: ctx, cache: k.cache, namespace: pod.Namespace}, k.probe)
		k.reportStatus(ctx, pod, rt)
	}
	for uid, rt := range k.pods {
		if !active[uid] {
			k.logf("pod %s is gone: stopping it", rt.key)
			rt.stop()
			delete(k.pods, uid)
		}
	}
}

// admit gives a new pod its IP and starts its application.
func (k *Kubelet) admit(pod *corev1.Pod) (*podRuntime, error) {
	var ports []int32
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				ports = append(ports, p.ContainerPort)
			}
		}
	}
	ip, err := k.ips.allocate(ports)
	if err != nil {
		return nil, err
	}
	rt, err := newPodRuntime(pod, filepath.Join(k.dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)[:8]), ip, k.images)
	if err != nil {
		return nil, err
	}
	k.logf("pod %s/%s runs on %s", pod.Namespace, pod.Name, ip)
	return rt, nil
}

// reportStatus patches the pod's status when what runs changed.
func (k *Kubelet) reportStatus(ctx context.Context, pod *corev1.Pod, rt *podRuntime) {
	want := podStatus(pod, rt)
	if !statusChanged(&pod.Status, &want) {
		return
	}
	patched := pod.DeepCopy()
	patched.Status = want
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := k.client.Status().Patch(ctx, patched, client.MergeFrom(pod)); err != nil && !apierrors.IsNotFound(err) {
		k.logf("pod %s: report status: %v", rt.key, err)
	}
}

// writeVolumes brings the pod's ConfigMap, Secret and downward API volumes
// up to date, as the kubelet does periodically. A volume whose object
// cannot be read keeps its files.
func (k *Kubelet) writeVolumes(ctx context.Context, pod *corev1.Pod, rt *podRuntime) {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && k.held[rt.key] {
			continue
		}
		files, err := k.volumeFiles(ctx, pod, rt, &v)
		if err != nil {
			k.logf("pod %s: volume %s: %v", rt.key, v.Name, err)
			continue
		}
		if files == nil {
			continue
		}
		if err := writeVolume(rt.volumeDir(v.Name), files); err != nil {
			k.logf("pod %s: volume %s: %v", rt.key, v.Name, err)
		}
	}
}

// volumeFiles are the files of volume v; nil for a kind of volume that has
// none here (emptyDir and others get an empty directory).
func (k *Kubelet) volumeFiles(ctx context.Context, pod *corev1.Pod, rt *podRuntime, v *corev1.Volume) (map[string][]byte, error) {
	switch {
	case v.ConfigMap != nil:
		var cm corev1.ConfigMap
		err := k.cache.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: v.ConfigMap.Name}, &cm)
		if apierrors.IsNotFound(err) {
			return map[string][]byte{}, nil // optional, or the pod would not start
		}
		if err != nil {
			return nil, err
		}
		data := map[string][]byte{}
		for key, value := range cm.Data {
			data[key] = []byte(value)
		}
		for key, value := range cm.BinaryData {
			data[key] = value
		}
		return project(data, v.ConfigMap.Items), nil
	case v.Secret != nil:
		var s corev1.Secret
		err := k.cache.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: v.Secret.SecretName}, &s)
		if apierrors.IsNotFound(err) {
			return map[string][]byte{}, nil
		}
		if err != nil {
			return nil, err
		}
		return project(s.Data, v.Secret.Items), nil
	case v.DownwardAPI != nil:
		files := map[string][]byte{}
		for _, item := range v.DownwardAPI.Items {
			if item.FieldRef == nil {
				continue
			}
			switch item.FieldRef.FieldPath {
			case "metadata.labels":
				files[item.Path] = downwardLabels(pod.Labels)
			case "metadata.annotations":
				files[item.Path] = downwardLabels(pod.Annotations)
			default:
				value, err := podField(pod, item.FieldRef.FieldPath, rt.ip)
				if err != nil {
					return nil, err
				}
				files[item.Path] = []byte(value)
			}
		}
		return files, nil
	}
	return nil, os.MkdirAll(rt.volumeDir(v.Name), 0o755)
}

// project keeps the items of data a volume names, under their paths; all
// of data when it names none.
func project(data map[string][]byte, items []corev1.KeyToPath) map[string][]byte {
	if len(items) == 0 {
		return data
	}
	out := map[string][]byte{}
	for _, item := range items {
		if value, ok := data[item.Key]; ok {
			out[item.Path] = value
		}
	}
	return out
}

// HoldConfigMaps stops updating the ConfigMap volumes of a pod until
// ReleaseConfigMaps, as a kubelet that is slow to sync them (they take up
// to a minute or two in a cluster): the pod's enforcer keeps the
// configuration it has.
func (k *Kubelet) HoldConfigMaps(namespace, pod string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held[types.NamespacedName{Namespace: namespace, Name: pod}] = true
}

// ReleaseConfigMaps updates the pod's ConfigMap volumes again, at once.
func (k *Kubelet) ReleaseConfigMaps(namespace, pod string) {
	k.mu.Lock()
	delete(k.held, types.NamespacedName{Namespace: namespace, Name: pod})
	k.mu.Unlock()
	k.trigger()
}

// Pods lists what runs, sorted by namespace and name.
func (k *Kubelet) Pods() []PodInfo {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []PodInfo
	for _, rt := range k.pods {
		info := PodInfo{Namespace: rt.key.Namespace, Name: rt.key.Name, IP: rt.ip, Ready: rt.ready(), Sidecars: map[string]SidecarInfo{}}
		for _, s := range rt.sidecars {
			si := SidecarInfo{Restarts: s.restarts, Ready: s.ready, LogPath: filepath.Join(rt.dir, s.spec.Name+".log"), Ports: map[string]int32{}}
			if s.proc != nil {
				si.Pid = s.proc.Pid()
			}
			for _, p := range s.spec.Ports {
				si.Ports[p.Name] = p.ContainerPort
			}
			info.Sidecars[s.spec.Name] = si
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b PodInfo) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Served counts the requests that reached the application of a pod.
func (k *Kubelet) Served(namespace, name string) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, rt := range k.pods {
		if rt.key.Namespace == namespace && rt.key.Name == name {
			return rt.app.served.Load()
		}
	}
	return 0
}

// stopAll stops every pod, at once.
func (k *Kubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	var wg sync.WaitGroup
	for uid, rt := range k.pods {
		wg.Go(rt.stop)
		delete(k.pods, uid)
	}
	wg.Wait()
}

func (k *Kubelet) logf(format string, args ...any) {
	fmt.Fprintf(k.log, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

// namespaceValues reads env valueFrom objects of one namespace from the
// kubelet's cache.
type namespaceValues struct {
	ctx       context.Context
	cache     cache.Cache
	namespace string
}

func (v *namespaceValues) SecretKey(name, key string) (string, bool, error) {
	var s corev1.Secret
	if err := v.cache.Get(v.ctx, types.NamespacedName{Namespace: v.namespace, Name: name}, &s); err != nil {
		return "", false, client.IgnoreNotFound(err)
	}
	value, ok := s.Data[key]
	return string(value), ok, nil
}

func (v *namespaceValues) ConfigMapKey(name, key string) (string, bool, error) {
	var cm corev1.ConfigMap
	if err := v.cache.Get(v.ctx, types.NamespacedName{Namespace: v.namespace, Name: name}, &cm); err != nil {
		return "", false, client.IgnoreNotFound(err)
	}
	value, ok := cm.Data[key]
	return value, ok, nil
}

// ipAllocator hands out loopback addresses in one /24 of 127.0.0.0/8,
// skipping any where one of the pod's ports is taken.
type ipAllocator struct {
	mu     sync.Mutex
	prefix [3]byte
	next   int
}

func newIPAllocator(prefix [3]byte) *ipAllocator {
	return &ipAllocator{prefix: prefix, next: 2}
}

func (a *ipAllocator) allocate(ports []int32) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ; a.next < 255; a.next++ {
		ip := fmt.Sprintf("%d.%d.%d.%d", a.prefix[0], a.prefix[1], a.prefix[2], a.next)
		if portsFree(ip, ports) {
			a.next++
			return ip, nil
		}
	}
	return "", fmt.Errorf("no free address left in %d.%d.%d.0/24", a.prefix[0], a.prefix[1], a.prefix[2])
}

func portsFree(ip string, ports []int32) bool {
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(p))))
		if err != nil {
			return false
		}
		_ = ln.Close()
	}
	return true
}
