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
	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// ban compiles a rule's ban, its default resolved; nil stays nil.
func ban(b *v1alpha1.Ban) *config.Ban {
	if b == nil {
		return nil
	}
	out := &config.Ban{
		Denials:     int64(b.After.Denials),
		Within:      config.Duration{Duration: b.After.Within.Duration},
		ForgetAfter: config.Duration{Duration: b.ForgetAfterOrDefault()},
	}
	for _, d := range b.Durations {
		out.Durations = append(out.Durations, config.Duration{Duration: d.Duration})
	}
	return out
}
