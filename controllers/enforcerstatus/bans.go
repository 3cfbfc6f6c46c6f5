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
	"github.com/sluice-dev/sluice/api/v1alpha1"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
)

// addBans folds an enforcer's count of p's bans into bans. Every enforcer
// of a policy counts the same bans in the same Redis: the status takes the
// highest count, the most recent poll of a ban that just started.
func addBans(bans *v1alpha1.BanStatus, st *statusdoc.Document, p *v1alpha1.RateLimitPolicy) *v1alpha1.BanStatus {
	loaded := loadedPolicy(st, p)
	if loaded == nil || loaded.Bans == nil {
		return bans
	}
	if bans == nil {
		return &v1alpha1.BanStatus{Active: loaded.Bans.Active}
	}
	bans.Active = max(bans.Active, loaded.Bans.Active)
	return bans
}
