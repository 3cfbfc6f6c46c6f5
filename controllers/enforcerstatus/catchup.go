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

import "time"

const (
	// catchUpPoll is how often, once a new configuration is published, the
	// enforcers still on an earlier one are asked again, rather than at the
	// next pass: an edit is reported Ready about a second after the
	// enforcers applied it, not up to an interval later.
	catchUpPoll = time.Second
	// catchUpFor bounds that: an enforcer that keeps an earlier
	// configuration (it refused the new one) is then polled at the
	// interval only. It covers the kubelet's refresh of a ConfigMap volume.
	catchUpFor = 2 * time.Minute
)

// askBehind has the poller ask, outside its pass, the enforcers that do
// not run the namespace's published configuration yet, while it is recent;
// it tells whether any was asked, for Reconcile to look again soon.
func (r *Reconciler) askBehind(pods []selectedPod, history []seenConfig) bool {
	if len(history) == 0 {
		return false
	}
	published := history[len(history)-1]
	if time.Since(published.seenAt) > catchUpFor {
		return false
	}
	behind := false
	for _, sp := range pods {
		if sp.Service || sp.Polled.Status == nil || sp.Polled.Status.Config.Hash == published.hash {
			continue
		}
		r.poller.ask(sp.Pod)
		behind = true
	}
	return behind
}
