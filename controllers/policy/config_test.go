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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/testing/bulkpolicy"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// A large configuration is written compressed to binaryData, a small one
// as JSON to data; the ConfigMap holds one of the two keys at a time, and
// the manager reads either back.
func TestSetConfigMapHoldsOneForm(t *testing.T) {
	g := NewWithT(t)
	big := bulkpolicy.Overrides("shop", "many-overrides", 10000)
	big.UID, big.Generation = types.UID("uid-big"), 1
	large, err := compile.Namespace("shop", []v1alpha1.RateLimitPolicy{*big}, compile.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	small, err := compile.Namespace("shop", nil, compile.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(wellknown.CompressedConfigKey).To(Equal(wellknown.ConfigKey+config.CompressedSuffix), "enforcers read the file the key names")
	cm := &corev1.ConfigMap{Data: map[string]string{wellknown.ConfigKey: "old"}}
	setConfigMap(cm, large)
	g.Expect(cm.Data).To(BeEmpty())
	g.Expect(cm.BinaryData).To(HaveKeyWithValue(wellknown.CompressedConfigKey, large.Compressed))
	g.Expect(cm.Annotations).To(HaveKeyWithValue(wellknown.ConfigHashAnnotation, large.Hash))
	doc, err := config.DocumentIn(cm.Data, cm.BinaryData, wellknown.ConfigKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doc).To(Equal(large.JSON))

	setConfigMap(cm, small)
	g.Expect(cm.BinaryData).To(BeEmpty())
	g.Expect(cm.Data).To(Equal(map[string]string{wellknown.ConfigKey: string(small.JSON)}))
}
