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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// A configuration the policy controller wrote compressed tells which
// generation of each policy it holds, as a plain one does: enforcers that
// load it are up to date.
func TestPublishedConfigCompressed(t *testing.T) {
	g := NewWithT(t)
	doc := []byte(`{"schema":"sluice.dev/enforcer-config/v1","namespace":"shop","policies":[{"name":"api","uid":"uid-api","generation":7,` +
		`"selector":{"matchLabels":{"app":"api"}},"replicas":2,"upstreamPort":8080,"mode":"Enforce","failureMode":"Open","timeout":"50ms",` +
		`"responseHeaders":"Both","salt":"s","rules":[{"name":"all","match":{},"algorithm":"FixedWindow","cost":1,` +
		`"identity":{"sources":[{"shared":{}}]},"limits":[{"requests":5,"period":"1m"}]}]}]}`)
	cfg, err := config.Parse(doc)
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: wellknown.ConfigMapName, Namespace: "shop",
			Annotations: map[string]string{wellknown.ConfigHashAnnotation: cfg.Hash()}},
		BinaryData: map[string][]byte{wellknown.CompressedConfigKey: config.Compress(doc)},
	}
	r := &Reconciler{Client: pollerTestClient(cm)}
	seen, err := r.publishedConfigs(context.Background(), "shop")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(HaveLen(1))
	g.Expect(seen[0].entries).To(HaveKeyWithValue("uid-api", publishedEntry{Generation: 7, Replicas: 2, FailureMode: "Open"}))
}
