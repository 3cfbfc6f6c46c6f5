package kubectlplugin

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PermissionError is one permission the user lacks, in one line.
type PermissionError struct {
	Verb, Resource, Namespace string
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("missing permission: %s %s in namespace %s (ask for a Role that grants it)", e.Verb, e.Resource, e.Namespace)
}

// NotFoundError is an object that does not exist.
type NotFoundError struct {
	Resource, Namespace, Name string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s %q not found in namespace %s", e.Resource, e.Name, e.Namespace)
}

// apiError turns a 403 into the permission the user lacks and a 404 into
// the object that is not there; other errors as they are.
func apiError(err error, verb, resource, namespace, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return &PermissionError{Verb: verb, Resource: resource, Namespace: namespace}
	case apierrors.IsNotFound(err) && name != "":
		return &NotFoundError{Resource: resource, Namespace: namespace, Name: name}
	}
	return err
}

// permission is one verb on one resource (subresource after a slash, the
// object's name when the command needs one object only) that a command
// needs.
type permission struct {
	verb, group, resource, subresource, name string
}

func (p permission) String() string {
	r := p.resource
	if p.group != "" {
		r += "." + p.group
	}
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	if p.name != "" {
		r += " named " + p.name
	}
	return r
}

// require asks the API server, with SelfSubjectAccessReviews, whether the
// user has every permission of perms in the namespace: the first one
// missing is the error.
func (c *Clients) require(ctx context.Context, perms ...permission) error {
	for _, p := range perms {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.Namespace, Verb: p.verb,
				Group: p.group, Resource: p.resource, Subresource: p.subresource, Name: p.name}}}
		got, err := c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("ask the API server whether you may %s %s: %w", p.verb, p, err)
		}
		if !got.Status.Allowed {
			return &PermissionError{Verb: p.verb, Resource: p.String(), Namespace: c.Namespace}
		}
	}
	return nil
}

// IsPermission says whether err is a missing permission.
func IsPermission(err error) bool {
	var pe *PermissionError
	return errors.As(err, &pe)
}
