package controllers

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// maxEventNote is the longest note an events.k8s.io/v1 Event accepts; the
// API server refuses a longer one and the recorder does not shorten it.
const maxEventNote = 1024

// recordEvent records an Event on obj, its note cut to what the API
// accepts. Every controller's Events go through it.
func recordEvent(rec recorder.EventRecorder, obj runtime.Object, eventType, reason, action, note string) {
	recordEventAbout(rec, obj, nil, eventType, reason, action, note)
}

// recordEventAbout records an Event on obj about related. The recorder
// merges the Events of one object, reason and action into one series that
// keeps the first note; a related object of its own keeps apart the Events
// about two objects (two pods injected at once), each with its note.
func recordEventAbout(rec recorder.EventRecorder, obj, related runtime.Object, eventType, reason, action, note string) {
	rec.Eventf(obj, related, eventType, reason, action, "%s", truncate(note, maxEventNote))
}

// truncate cuts s to at most n bytes, on a character boundary, marking
// the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
