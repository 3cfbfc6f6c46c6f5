package fleet

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/internal/wellknown"
)

// reloadWorkers is how many enforcers of a namespace reload at once: the
// machine's cores do the work of as many kubelets as there are pods.
const reloadWorkers = 8

// Watch feeds the fleet from the API server until ctx ends: the pods bound
// to node (their enforcers), the namespaces' sluice-enforcer-config
// ConfigMaps (what the kubelet would write into the pods' volumes) and
// their admin Secrets (the /status token volume). Errors are written to
// logw. It returns once the first listing is in.
func (f *Fleet) Watch(ctx context.Context, cfg *rest.Config, node string, logw io.Writer) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, time.Now().Format(time.RFC3339Nano)+" "+format+"\n", args...)
	}

	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	named := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	configMaps := informers.NewSharedInformerFactoryWithOptions(cs, 0, named(wellknown.ConfigMapName))
	secrets := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = wellknown.ManagedByLabel + "=" + wellknown.ManagedByValue
	}))

	// ConfigMap changes of a namespace are applied in order, one at a
	// time, and never block the informer.
	var queues sync.Map // namespace -> chan string
	applyConfig := func(cm *corev1.ConfigMap) {
		q, loaded := queues.LoadOrStore(cm.Namespace, make(chan string, 64))
		ch := q.(chan string)
		if !loaded {
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case data := <-ch:
						if err := f.SetConfig(cm.Namespace, data, reloadWorkers); err != nil {
							logf("config: %v", err)
						}
					}
				}
			}()
		}
		select {
		case ch <- cm.Data[wellknown.ConfigKey]:
		case <-ctx.Done():
		}
	}
	_, _ = configMaps.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { applyConfig(obj.(*corev1.ConfigMap)) },
		UpdateFunc: func(_, obj any) { applyConfig(obj.(*corev1.ConfigMap)) },
	})
	setToken := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		switch {
		case !ok:
		case s.Name == wellknown.AdminSecretName:
			f.SetToken(s.Namespace, string(s.Data[wellknown.AdminTokenKey]))
		case s.Name == wellknown.AdminWriteSecretName:
			f.SetWriteToken(s.Namespace, string(s.Data[wellknown.AdminTokenKey]))
		}
	}
	_, _ = secrets.Core().V1().Secrets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: setToken, UpdateFunc: func(_, obj any) { setToken(obj) },
	})
	addPod := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			if err := f.Add(pod); err != nil {
				logf("pod: %v", err)
			}
		}
	}
	_, _ = pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    addPod,
		UpdateFunc: func(_, obj any) { addPod(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				f.Remove(pod.UID)
			}
		},
	})
	for _, factory := range []informers.SharedInformerFactory{secrets, configMaps, pods} {
		factory.Start(ctx.Done())
		for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("fleet: %v informer did not sync", typ)
			}
		}
	}
	return nil
}
