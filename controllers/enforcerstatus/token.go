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

package enforcerstatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/wellknown"
)

// adminToken is the namespace's /status token, which the policy controller
// keeps in the admin Secret, read through secrets; empty when the Secret
// does not exist yet.
func adminToken(ctx context.Context, secrets client.Reader, namespace string) (string, error) {
	secret := &corev1.Secret{}
	err := secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: wellknown.AdminSecretName}, secret)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read Secret %s/%s: %w", namespace, wellknown.AdminSecretName, err)
	}
	return string(secret.Data[wellknown.AdminTokenKey]), nil
}
