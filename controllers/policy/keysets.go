package policy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/compile"
)

// keySetRecheck is how often a namespace whose policies keep a key set in
// a ConfigMap is compiled again: the manager's cache holds only its own
// ConfigMaps, so an edit of the user's shows no event. Secrets are
// watched, so a key set in a Secret is compiled again at once.
const keySetRecheck = time.Minute

// readKeySets reads the key set of every Secret or ConfigMap key that a
// jwtClaim source of policies names, from the API server (the cache holds
// Secrets' metadata and the manager's own ConfigMaps only). A missing
// object or key is left out: compiling reports it.
func (r *Reconciler) readKeySets(ctx context.Context, namespace string, policies []*v1alpha1.RateLimitPolicy) (map[compile.KeySetRef][]byte, error) {
	out := map[compile.KeySetRef][]byte{}
	for _, p := range policies {
		for _, ref := range compile.KeySetRefs(p) {
			if _, seen := out[ref]; seen {
				continue
			}
			data, err := r.readKeySet(ctx, namespace, ref)
			if err != nil {
				return nil, err
			}
			if data != nil {
				out[ref] = data
			}
		}
	}
	return out, nil
}

func (r *Reconciler) readKeySet(ctx context.Context, namespace string, ref compile.KeySetRef) ([]byte, error) {
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	var obj client.Object
	var data func() ([]byte, bool)
	switch ref.Kind {
	case "Secret":
		s := &corev1.Secret{}
		obj, data = s, func() ([]byte, bool) { v, ok := s.Data[ref.Key]; return v, ok }
	default:
		c := &corev1.ConfigMap{}
		obj, data = c, func() ([]byte, bool) {
			if v, ok := c.Data[ref.Key]; ok {
				return []byte(v), true
			}
			v, ok := c.BinaryData[ref.Key]
			return v, ok
		}
	}
	err := r.APIReader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	}
	if v, ok := data(); ok {
		return v, nil
	}
	return nil, nil
}

// keySetInConfigMap says whether a policy keeps a key set in a ConfigMap.
func keySetInConfigMap(policies []*v1alpha1.RateLimitPolicy) bool {
	for _, p := range policies {
		for _, ref := range compile.KeySetRefs(p) {
			if ref.Kind == "ConfigMap" {
				return true
			}
		}
	}
	return false
}

// secretsNamed are the Secrets a policy names: its storage's and its key
// sets'.
func secretsNamed(p *v1alpha1.RateLimitPolicy) []string {
	var out []string
	if ref := p.Spec.StorageSecret(); ref != nil {
		out = append(out, ref.Name)
	}
	for _, ref := range compile.KeySetRefs(p) {
		if ref.Kind == "Secret" {
			out = append(out, ref.Name)
		}
	}
	return out
}
