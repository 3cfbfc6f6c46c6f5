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

package policy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/wellknown"
)

const (
	// adminTokenBytes is the token's entropy.
	adminTokenBytes = 32
)

// reconcileAdminSecrets keeps the namespace's two admin Secrets: the read
// token's (sluice-enforcer-admin: /status, what the status controller
// polls with) and the write token's (sluice-enforcer-admin-write: resets
// and ban lifts). Two Secrets, so that RBAC can grant get on the first
// alone by resourceNames.
func (r *Reconciler) reconcileAdminSecrets(ctx context.Context, namespace string) error {
	var errs []error
	for _, name := range wellknown.AdminSecretNames {
		errs = append(errs, r.reconcileAdminSecret(ctx, namespace, name))
	}
	return errors.Join(errs...)
}

// reconcileAdminSecret keeps the admin Secret name: created once with a
// random token, which later passes keep. Like the ConfigMap it has no
// owner: the enforcers that read it outlive the policies (the garbage
// collector would delete it with the last of them), and the manager
// deletes it once no injected pod is left. A Secret of that name the
// controller did not create is taken over with a new token: whoever made
// it may know the old one.
func (r *Reconciler) reconcileAdminSecret(ctx context.Context, namespace, name string) error {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	secret := &corev1.Secret{}
	err := r.secrets().Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		if err = setAdminSecret(secret, true); err == nil {
			err = r.Create(ctx, secret)
		}
		if !apierrors.IsAlreadyExists(err) {
			break
		}
		// It exists without our label, so the cache cannot see it.
		if err = r.APIReader.Get(ctx, key, secret); err == nil {
			if err = setAdminSecret(secret, true); err == nil {
				err = r.Update(ctx, secret)
			}
		}
	case err == nil:
		before := secret.DeepCopy()
		if err = setAdminSecret(secret, len(secret.Data[wellknown.AdminTokenKey]) < adminTokenBytes); err == nil &&
			!equality.Semantic.DeepEqual(before, secret) {
			err = r.Update(ctx, secret)
		}
	}
	if err != nil {
		return fmt.Errorf("write Secret %s/%s: %w", namespace, name, err)
	}
	return nil
}

// setAdminSecret labels secret, drops the policies' ownership an older
// manager gave it, and gives it a new token when newToken is set or it has
// none.
func setAdminSecret(secret *corev1.Secret, newToken bool) error {
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[wellknown.ManagedByLabel] = wellknown.ManagedByValue
	secret.OwnerReferences = nil
	secret.Type = corev1.SecretTypeOpaque
	if !newToken && len(secret.Data[wellknown.AdminTokenKey]) > 0 {
		return nil
	}
	b := make([]byte, adminTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	secret.Data = map[string][]byte{wellknown.AdminTokenKey: []byte(base64.RawURLEncoding.EncodeToString(b))}
	secret.StringData = nil
	return nil
}

// deleteAdminSecrets removes the admin Secrets of a namespace without
// policies or injected pods, as deleteConfigMap does the ConfigMap.
func (r *Reconciler) deleteAdminSecrets(ctx context.Context, namespace string) error {
	var errs []error
	for _, name := range wellknown.AdminSecretNames {
		errs = append(errs, r.deleteAdminSecret(ctx, namespace, name))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) deleteAdminSecret(ctx context.Context, namespace, name string) error {
	secret := &corev1.Secret{}
	err := r.secrets().Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	err = r.Delete(ctx, secret, client.Preconditions{UID: &secret.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s/%s: %w", namespace, name, err)
	}
	return nil
}
