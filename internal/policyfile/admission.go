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

package policyfile

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/operation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/config/crd"
)

// admission holds a policy to the CRD the way the API server does on create:
// the same structural schema, pruning, defaulting, OpenAPI validation and CEL
// rules, from the same libraries, read from the CRD the cluster installs.
// The API server's own registry package would do this in one call but links
// its storage (the etcd client, gRPC); its steps are few and are repeated
// here in its order.
type admission struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// policyAdmission is built once: compiling the CEL rules takes a while.
var policyAdmission = sync.OnceValues(func() (*admission, error) {
	return newAdmission(crd.RateLimitPolicies, v1alpha1.GroupVersion.Version)
})

func newAdmission(crdYAML []byte, version string) (*admission, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &def); err != nil {
		return nil, fmt.Errorf("read the CRD: %w", err)
	}
	var validation *apiextensionsv1.CustomResourceValidation
	for _, v := range def.Spec.Versions {
		if v.Name == version {
			validation = v.Schema
		}
	}
	if validation == nil || validation.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("the CRD %s has no schema for version %s", def.Name, version)
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
		return nil, fmt.Errorf("convert the schema of CRD %s: %w", def.Name, err)
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of CRD %s is not structural: %w", def.Name, err)
	}
	structural = structural.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(structural); err != nil {
		return nil, fmt.Errorf("the defaults of CRD %s: %w", def.Name, err)
	}
	schema, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of CRD %s: %w", def.Name, err)
	}
	return &admission{
		structural: structural,
		schema:     schema,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// UnknownFieldsError is an object with fields the schema does not have. The
// API server refuses it (kubectl's default field validation is Strict) before
// it defaults or validates anything, so these are all the problems it reports.
type UnknownFieldsError struct {
	Paths []string
}

func (e *UnknownFieldsError) Error() string {
	msgs := make([]string, len(e.Paths))
	for i, p := range e.Paths {
		msgs[i] = fmt.Sprintf("unknown field %q", p)
	}
	return fmt.Sprintf("RateLimitPolicy in version %q cannot be handled as a RateLimitPolicy: strict decoding error: %s",
		v1alpha1.GroupVersion.Version, strings.Join(msgs, ", "))
}

// InvalidError is a policy the API server would refuse, with every problem
// it would report, each with its field path.
type InvalidError struct {
	Name string
	Errs field.ErrorList
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "RateLimitPolicy %q is invalid:", e.Name)
	for _, err := range e.Errs {
		b.WriteString("\n  ")
		if err.Field == notChecked.String() {
			// the API server's line for it reads "<nil>: Invalid value: null: ..."
			b.WriteString("some validation rules were not checked because of the problems above: correct them and check again")
			continue
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// prune drops what the schema does not know, as the API server's decoder
// does, and returns the paths it dropped.
func (a *admission) prune(obj map[string]any) ([]string, error) {
	kind, apiVersion := obj["kind"], obj["apiVersion"]
	meta, hasMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, err
	}
	unknown = append(unknown, structuralpruning.PruneWithOptions(obj, a.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, a.structural)
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, a.structural, false,
		schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, paths...)
	obj["kind"], obj["apiVersion"] = kind, apiVersion
	if hasMeta {
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// admit prunes, defaults and validates u in place, as a create request with
// strict field validation. The error is an *UnknownFieldsError, or an
// *InvalidError with every problem the API server would report.
func (a *admission) admit(u *unstructured.Unstructured) error {
	unknown, err := a.prune(u.Object)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return &UnknownFieldsError{Paths: unknown}
	}
	structuraldefaulting.Default(u.Object, a.structural)
	// What the API server does to every new object before validating it.
	delete(u.Object, "status")
	u.SetGeneration(1)
	errs := quoteStatuses(u.Object)
	if errs = append(errs, a.validate(u)...); len(errs) > 0 {
		return &InvalidError{Name: u.GetName(), Errs: errs}
	}
	return nil
}

// validate is the API server's validation of a new custom resource: its
// metadata, the OpenAPI schema, embedded objects, list types, and then the
// CEL rules unless an earlier error means they cannot all be evaluated.
func (a *admission) validate(u *unstructured.Unstructured) field.ErrorList {
	ctx := context.Background()
	var errs field.ErrorList
	meta := &metav1.ObjectMeta{}
	if raw, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, meta); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
		}
	}
	errs = append(errs, metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, meta, nil, true,
		metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"),
		utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, a.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, a.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, a.structural, u.Object)...)
	if blocking(errs) {
		return append(errs, field.Invalid(notChecked, nil,
			"some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
	}
	celErrs, _ := a.cel.Validate(ctx, nil, a.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// notChecked is the path of the API server's error saying that the CEL
// rules were not evaluated.
var notChecked *field.Path

// blocking reports errors after which the API server does not evaluate the
// CEL rules: a value of the wrong type or size, or one that is missing.
func blocking(errs field.ErrorList) bool {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
			field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}
