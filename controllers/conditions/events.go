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

package conditions

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// MaxEventNote is the longest note an events.k8s.io/v1 Event accepts; the
// API server refuses a longer one and the recorder does not shorten it.
const MaxEventNote = 1024

// RecordEvent records an Event on obj, its note cut to what the API
// accepts. Every controller's Events go through it.
func RecordEvent(rec recorder.EventRecorder, obj runtime.Object, eventType, reason, action, note string) {
	RecordEventAbout(rec, obj, nil, eventType, reason, action, note)
}

// RecordEventAbout records an Event on obj about related. The recorder
// merges the Events of one object, reason and action into one series that
// keeps the first note; a related object of its own keeps apart the Events
// about two objects (two pods injected at once), each with its note.
func RecordEventAbout(rec recorder.EventRecorder, obj, related runtime.Object, eventType, reason, action, note string) {
	rec.Eventf(obj, related, eventType, reason, action, "%s", Truncate(note, MaxEventNote))
}

// Truncate cuts s to at most n bytes, on a character boundary, marking
// the cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
