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

// Package policyfile reads RateLimitPolicy YAML files (sluice-policy-compile,
// which sluice-enforcer --policy-file runs) and admits them as the API server would: what a cluster
// refuses, a file is refused for, with the same messages, all of them.
package policyfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// document is one YAML document of a file, decoded but not yet admitted.
type document struct {
	where string // file and document number, for messages
	obj   *unstructured.Unstructured
}

// Load reads RateLimitPolicy YAML documents from paths (several documents per
// file, separated by "---"; a folder is its .yaml, .yml and .json files, as
// kubectl apply -f reads one) and admits each as the API server would: unknown
// fields refused, the CRD's defaults applied, its schema and CEL rules
// checked. The policies must all belong to one namespace: the namespace of
// the first policy that names one, else defaultNamespace, else "default".
// Every problem of every document is reported, not only the first.
func Load(defaultNamespace string, paths ...string) (string, []v1alpha1.RateLimitPolicy, error) {
	var docs []document
	var errs []error
	paths, err := expand(paths)
	if err != nil {
		return "", nil, fmt.Errorf("load policies: %w", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", nil, fmt.Errorf("load policies: %w", err)
		}
		d, err := decode(path, data)
		docs = append(docs, d...)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return "", nil, fmt.Errorf("load policies: %w", err)
	}
	if len(docs) == 0 {
		return "", nil, fmt.Errorf("load policies: no RateLimitPolicy in %v", paths)
	}
	namespace := defaultNamespace
	for _, d := range docs {
		if ns := d.obj.GetNamespace(); ns != "" {
			namespace = ns
			break
		}
	}
	if namespace == "" {
		namespace = "default"
	}
	seen := map[string]bool{}
	for _, d := range docs {
		if d.obj.GetNamespace() == "" {
			d.obj.SetNamespace(namespace)
		}
		name := d.obj.GetName()
		switch {
		case d.obj.GetNamespace() != namespace:
			return "", nil, fmt.Errorf("load policies: %s: policy %s/%s is not in namespace %s: one enforcer applies the policies of one namespace",
				d.where, d.obj.GetNamespace(), name, namespace)
		case name != "" && seen[name]:
			return "", nil, fmt.Errorf("load policies: %s: policy %q is defined twice", d.where, name)
		}
		seen[name] = true
	}
	policies, err := admitAll(docs)
	if err != nil {
		return "", nil, fmt.Errorf("load policies: %w", err)
	}
	return namespace, policies, nil
}

// expand replaces each folder of paths by its manifest files in name
// order, without descending into subfolders (kubectl's -f without -R).
// kustomize's own file is no resource and is skipped.
func expand(paths []string) ([]string, error) {
	var out []string
	for _, path := range paths {
		info, err := os.Stat(path)
		if err != nil || !info.IsDir() {
			out = append(out, path) // ReadFile reports what is wrong
			continue
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		n := len(out)
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") ||
				strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())) == "kustomization" {
				continue
			}
			out = append(out, filepath.Join(path, e.Name()))
		}
		if len(out) == n {
			return nil, fmt.Errorf("folder %s has no .yaml, .yml or .json file", path)
		}
	}
	return out, nil
}

// Parse decodes and admits every YAML document of data as a RateLimitPolicy
// of namespace "default" unless it names one.
func Parse(data []byte) ([]v1alpha1.RateLimitPolicy, error) {
	docs, err := decode("", data)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if d.obj.GetNamespace() == "" {
			d.obj.SetNamespace("default")
		}
	}
	return admitAll(docs)
}

// decoder reads YAML as the API server reads a request body: duplicate
// fields are errors.
var decoder = json.NewSerializerWithOptions(json.DefaultMetaFactory,
	unstructuredscheme.NewUnstructuredCreator(), unstructuredscheme.NewUnstructuredObjectTyper(),
	json.SerializerOptions{Yaml: true, Strict: true})

// decode splits data into documents and decodes each; empty documents are
// skipped, and a document that is no RateLimitPolicy is an error.
func decode(path string, data []byte) ([]document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []document
	var errs []error
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, errors.Join(errs...)
		}
		where := fmt.Sprintf("document %d", n)
		if path != "" {
			where = path + " " + where
		}
		if err != nil {
			return docs, errors.Join(append(errs, fmt.Errorf("%s: %w", where, err))...)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if _, _, err := decoder.Decode(raw, nil, u); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		gv := v1alpha1.GroupVersion.String()
		if u.GetAPIVersion() != gv || u.GetKind() != "RateLimitPolicy" {
			errs = append(errs, fmt.Errorf("%s: want apiVersion %s and kind RateLimitPolicy, got %q %q", where, gv, u.GetAPIVersion(), u.GetKind()))
			continue
		}
		docs = append(docs, document{where: where, obj: u})
	}
}

// admitAll admits every document, reporting the problems of all of them.
func admitAll(docs []document) ([]v1alpha1.RateLimitPolicy, error) {
	a, err := policyAdmission()
	if err != nil {
		return nil, err
	}
	policies := make([]v1alpha1.RateLimitPolicy, 0, len(docs))
	var errs []error
	for _, d := range docs {
		p, err := admit(a, d.obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.where, err))
			continue
		}
		policies = append(policies, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return policies, nil
}

func admit(a *admission, u *unstructured.Unstructured) (v1alpha1.RateLimitPolicy, error) {
	var p v1alpha1.RateLimitPolicy
	if err := a.admit(u); err != nil {
		return p, err
	}
	if u.GetName() == "" {
		return p, errors.New("metadata.name is required: outside a cluster nothing generates a name")
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return p, fmt.Errorf("policy %s: %w", u.GetName(), err)
	}
	// Outside a cluster nothing assigns a UID; the compiled config and
	// /status still name it, and it salts tenant hashes: keep it stable
	// across processes.
	p.UID = types.UID("file:" + p.Namespace + "/" + p.Name)
	return p, nil
}

// stripComments drops comment lines, so a document holding only comments
// counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}
