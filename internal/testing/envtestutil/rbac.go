// Package envtestutil holds what the envtest suites share.
package envtestutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ManagerUser creates user with exactly the roles of roleFile (the
// generated config/rbac/role.yaml: ClusterRoles, and Roles in their
// namespaces, which it creates) and returns the user's rest.Config, so a
// suite whose controllers lack an RBAC marker fails.
func ManagerUser(ctx context.Context, c client.Client, env *envtest.Environment, admin *rest.Config, roleFile, user string) (*rest.Config, error) {
	data, err := os.ReadFile(roleFile)
	if err != nil {
		return nil, err
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user, APIGroup: rbacv1.GroupName}}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var role rbacv1.ClusterRole // a Role has the same fields
		if err := decoder.Decode(&role); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode %s: %w", roleFile, err)
		}
		if err := grant(ctx, c, &role, subject); err != nil {
			return nil, err
		}
	}
	u, err := env.AddUser(envtest.User{Name: user}, admin)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

func grant(ctx context.Context, c client.Client, role *rbacv1.ClusterRole, subject []rbacv1.Subject) error {
	if role.Namespace == "" {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   subject,
		}
		return errors.Join(c.Create(ctx, role), c.Create(ctx, binding))
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: role.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   subject,
	}
	return errors.Join(c.Create(ctx, &rbacv1.Role{ObjectMeta: role.ObjectMeta, Rules: role.Rules}), c.Create(ctx, binding))
}

// WriteAdminKubeconfig writes a kubeconfig for a cluster-admin user of env
// to path, for the kubectl and helm binaries the suites run.
func WriteAdminKubeconfig(env *envtest.Environment, cfg *rest.Config, path string) error {
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return err
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
