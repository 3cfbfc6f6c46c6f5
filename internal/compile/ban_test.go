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

package compile

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

func TestTheLoginSampleCompilesItsBan(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "login")
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	ban := compiledRule(g, compiled, "login").Ban
	g.Expect(ban).To(Equal(&config.Ban{
		Denials: 10, Within: config.Duration{Duration: time.Minute},
		Durations:   []config.Duration{{Duration: 5 * time.Minute}, {Duration: time.Hour}, {Duration: 24 * time.Hour}},
		ForgetAfter: config.Duration{Duration: 24 * time.Hour},
	}))

	p.Spec.Rules[0].Ban.ForgetAfter = nil
	compiled, err = Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiledRule(g, compiled, "login").Ban.ForgetAfter.Duration).To(Equal(24*time.Hour), "forgetAfter defaults to 24h")

	p.Spec.Rules[0].Ban = nil
	compiled, err = Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiledRule(g, compiled, "login").Ban).To(BeNil())
}
