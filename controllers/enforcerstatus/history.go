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
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// configsRemembered is how many configurations of a namespace the status
// controller remembers: enforcers on older ones are told apart by hash only.
const configsRemembered = 8

// publishedEntry is what one configuration of the namespace holds for a
// policy: what its enforcers apply.
type publishedEntry struct {
	Generation int64
	// Replicas is the pod count LocalFallback divides limits by.
	Replicas    int32
	FailureMode string
}

// publishedEntries is what the namespace's configurations say of one
// policy: its entry in the published one, and in the earlier ones seen.
type publishedEntries struct {
	// Hash is the published configuration's; "" when none is known.
	Hash string
	// Current is the policy's entry in it; nil without one.
	Current *publishedEntry
	// Earlier are the policy's entries in earlier configurations, by hash.
	Earlier map[string]publishedEntry
}

// runsCurrentEntry says whether an enforcer that loaded the configuration
// of hash, and there the policy's current generation, applies the policy
// as published. A configuration that moved for another policy changes
// nothing for this one; one with another pod count changes its
// LocalFallback share, the only use of the count.
func (e publishedEntries) runsCurrentEntry(hash string) bool {
	if e.Hash == "" || hash == e.Hash || e.Current == nil {
		return true
	}
	if e.Current.FailureMode != string(v1alpha1.FailureModeLocalFallback) {
		return true
	}
	earlier, known := e.Earlier[hash]
	return known && earlier == *e.Current
}

// seenConfig is one configuration the policy controller published: its
// hash and the entry of each policy, by UID.
type seenConfig struct {
	hash    string
	entries map[string]publishedEntry
	// seenAt is when the status controller first saw it published.
	seenAt time.Time
}

// configHistory remembers, per namespace, the last configurations
// published, so that an enforcer still running an earlier one is known to
// run the same entry of the policies that did not change.
type configHistory struct {
	mu         sync.Mutex
	namespaces map[string][]seenConfig
}

// observe records the namespace's published configuration (data, of hash)
// and returns the namespace's history, the published configuration last.
// An empty hash means none is published.
func (h *configHistory) observe(namespace, hash, data string) []seenConfig {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.namespaces == nil {
		h.namespaces = map[string][]seenConfig{}
	}
	seen := h.namespaces[namespace]
	if hash == "" {
		return nil
	}
	if i := slices.IndexFunc(seen, func(c seenConfig) bool { return c.hash == hash }); i >= 0 {
		c := seen[i]
		seen = append(slices.Delete(seen, i, i+1), c)
	} else {
		seen = append(seen, seenConfig{hash: hash, entries: entriesOf(data), seenAt: time.Now()})
		if len(seen) > configsRemembered {
			seen = slices.Delete(seen, 0, len(seen)-configsRemembered)
		}
	}
	h.namespaces[namespace] = seen
	return slices.Clone(seen)
}

// forget drops the history of a namespace without policies.
func (h *configHistory) forget(namespace string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.namespaces, namespace)
}

// entriesOf reads the policies' entries of a configuration; none when it
// does not parse (enforcers refuse it too).
func entriesOf(data string) map[string]publishedEntry {
	parsed, err := config.Parse([]byte(data))
	if err != nil {
		return nil
	}
	entries := make(map[string]publishedEntry, len(parsed.Policies))
	for _, p := range parsed.Policies {
		entries[p.UID] = publishedEntry{Generation: p.Generation, Replicas: p.Replicas, FailureMode: string(p.FailureMode)}
	}
	return entries
}

// entriesFor is what history, the published configuration last, says of
// the policy of uid.
func entriesFor(history []seenConfig, uid string) publishedEntries {
	if len(history) == 0 {
		return publishedEntries{}
	}
	published := history[len(history)-1]
	e := publishedEntries{Hash: published.hash, Earlier: map[string]publishedEntry{}}
	if cur, ok := published.entries[uid]; ok {
		e.Current = &cur
	}
	for _, c := range history[:len(history)-1] {
		if entry, ok := c.entries[uid]; ok {
			e.Earlier[c.hash] = entry
		}
	}
	return e
}
