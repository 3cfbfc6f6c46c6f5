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

package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/sluice-dev/sluice/internal/wellknown"
)

// The self-managed certificate: the rotator keeps a CA and a serving
// certificate in a Secret of the manager's namespace (which the manager's
// pod mounts as its certificate directory) and the CA in the webhook
// configuration's caBundle.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;update,namespace=sluice-system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch;update;patch

// Certificates says where the webhook's serving certificate comes
// from.
type Certificates struct {
	// SelfManaged has the manager generate and rotate the certificate.
	// Off, something else (cert-manager) writes it to CertDir and the
	// caBundle.
	SelfManaged bool
	// CertDir holds tls.crt and tls.key: the mounted Secret.
	CertDir string
	// Secret is where the rotator keeps the CA and certificate.
	Secret types.NamespacedName
	// ServiceName is the webhook Service; the certificate is for
	// <ServiceName>.<Secret.Namespace>.svc.
	ServiceName string
	// WebhookConfigurationName is the MutatingWebhookConfiguration whose
	// caBundle the rotator sets.
	WebhookConfigurationName string
}

// SetupInjector serves injector on the manager's webhook server as
// soon as its certificate is in place, and returns a readiness check that
// fails until then: the webhook server cannot start without a certificate,
// and the rotator writes the first one only once the manager runs.
func SetupInjector(mgr ctrl.Manager, injector *PodInjector, certs Certificates) (healthz.Checker, error) {
	ready := make(chan struct{})
	if certs.SelfManaged {
		if certs.Secret.Namespace == "" || certs.Secret.Name == "" || certs.ServiceName == "" {
			return nil, errors.New("self-managed webhook certificates need the Secret's namespace and name and the Service's name")
		}
		name := certs.WebhookConfigurationName
		if name == "" {
			name = wellknown.InjectionWebhookConfigurationName
		}
		err := rotator.AddRotator(mgr, &rotator.CertRotator{
			SecretKey:      certs.Secret,
			CertDir:        certs.CertDir,
			CAName:         "sluice-ca",
			CAOrganization: "sluice",
			DNSName:        fmt.Sprintf("%s.%s.svc", certs.ServiceName, certs.Secret.Namespace),
			ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", certs.ServiceName, certs.Secret.Namespace)},
			IsReady:        ready,
			Webhooks:       []rotator.WebhookInfo{{Name: name, Type: rotator.Mutating}},
			FieldOwner:     "sluice-manager",
			// Every replica serves the webhook, so every replica needs the
			// certificate, leader or not.
			RequireLeaderElection: false,
		})
		if err != nil {
			return nil, fmt.Errorf("set up the webhook certificate rotator: %w", err)
		}
	} else {
		close(ready)
	}

	var serving atomic.Bool
	log := ctrl.Log.WithName("webhook")
	go func() {
		<-ready
		if err := injector.SetupWithManager(mgr); err != nil {
			log.Error(err, "cannot serve the injection webhook")
			return
		}
		serving.Store(true)
		log.Info("serving the injection webhook", "path", InjectionPath)
	}()
	return func(req *http.Request) error {
		if !serving.Load() {
			return errors.New("the injection webhook waits for its certificate")
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	}, nil
}
