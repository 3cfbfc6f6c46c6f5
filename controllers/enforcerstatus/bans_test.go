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
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
)

func TestEnforcerStatusCountsBansAndBannedDecisions(t *testing.T) {
	g := NewWithT(t)
	withBans := func(active, banned int64) *statusdoc.Document {
		st := healthy(4, 10, 2)
		st.Policies[0].Bans = &statusdoc.Bans{Active: active}
		d := st.Decisions["api"]
		d.Banned = banned
		st.Decisions["api"] = d
		return st
	}
	p := acceptedPolicy()
	setEnforcerStatus(p, []selectedPod{answered("a", withBans(2, 5)), answered("b", withBans(3, 7))}, publishedEntries{}, t0)
	g.Expect(p.Status.Bans).To(Equal(&v1alpha1.BanStatus{Active: 3}), "one Redis: the latest count, not a sum")
	g.Expect(p.Status.Decisions.Banned).To(Equal(int64(12)))
	g.Expect(p.Status.Decisions.Denied).To(Equal(int64(4)), "banned requests are not denied ones")

	p = acceptedPolicy()
	setEnforcerStatus(p, []selectedPod{answered("a", healthy(4, 1, 0))}, publishedEntries{}, t0)
	g.Expect(p.Status.Bans).To(BeNil(), "a policy without a ban shows none")
}
