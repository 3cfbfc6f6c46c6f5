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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// publications records what the reconciler hands to the pusher.
type publications struct {
	documents []string
	revisions []int64
}

func (p *publications) Publish(_ context.Context, _ string, document []byte, revision int64) error {
	p.documents = append(p.documents, string(document))
	p.revisions = append(p.revisions, revision)
	return nil
}

func (p *publications) Forget(string) {}

// TestRevisionOrdersThePublishedConfigurations: the revision stays while
// nothing changes, rises with every change, continues from the ConfigMap
// whatever the clock of the manager that writes it, and continues above
// the last one when the ConfigMap was deleted; what is pushed is the
// ConfigMap's document, once stored.
func TestRevisionOrdersThePublishedConfigurations(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	p := shopPolicy(t, "api", sidecarSpec, 1)
	r := statusReconciler(p)
	pub := &publications{}
	r.Delivery, r.Now = pub, func() time.Time { return now }
	revision := func() int64 { return readConfigMap(g, r, wellknown.ConfigMapName).Revision }
	configMapData := func() string {
		cm := &corev1.ConfigMap{}
		g.Expect(r.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: wellknown.ConfigMapName}, cm)).To(Succeed())
		return cm.Data[wellknown.ConfigKey]
	}
	edit := func(requests int64) {
		current := &v1alpha1.RateLimitPolicy{}
		g.Expect(r.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: "api"}, current)).To(Succeed())
		current.Spec.Rules[0].Limits[0].Requests = requests
		current.Generation++
		g.Expect(r.Update(context.Background(), current)).To(Succeed())
	}

	reconcileShop(g, r)
	first := revision()
	g.Expect(first).To(Equal(now.UnixMilli()))
	g.Expect(pub.revisions).To(Equal([]int64{first}))
	g.Expect(pub.documents).To(Equal([]string{configMapData()}), "the push carries the ConfigMap's document")

	reconcileShop(g, r)
	g.Expect(revision()).To(Equal(first), "nothing changed")

	edit(20)
	reconcileShop(g, r)
	g.Expect(revision()).To(Equal(first + 1))

	// A new leader whose clock is an hour behind continues the revision.
	now = now.Add(-time.Hour)
	edit(30)
	reconcileShop(g, r)
	g.Expect(revision()).To(Equal(first + 2))

	// The ConfigMap deleted by hand is written again above what enforcers hold.
	now = now.Add(time.Hour + time.Second)
	cm := &corev1.ConfigMap{}
	g.Expect(r.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: wellknown.ConfigMapName}, cm)).To(Succeed())
	g.Expect(r.Delete(context.Background(), cm)).To(Succeed())
	reconcileShop(g, r)
	g.Expect(revision()).To(BeNumerically(">", first+2))
	g.Expect(pub.revisions).To(HaveEach(BeNumerically(">=", first)))
	g.Expect(pub.documents[len(pub.documents)-1]).To(Equal(configMapData()))
}
