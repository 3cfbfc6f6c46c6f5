package conditions

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
)

// TestLongEventNotesAreCut: a Ready message can reach 4 KiB, four times
// what an Event's note may hold; the note is cut, on a character
// boundary, instead of the API server refusing the Event.
func TestLongEventNotesAreCut(t *testing.T) {
	g := NewWithT(t)
	rec := events.NewFakeRecorder(1)
	long := strings.Repeat("é", 4096/2) // 2-byte characters: a Ready message at its longest
	RecordEvent(rec, &corev1.Pod{}, corev1.EventTypeWarning, "EnforcersNotReady", EnforcerStatus.EventAction, long)
	got := <-rec.Events
	note := got[strings.Index(got, "é"):]
	g.Expect(len(note)).To(BeNumerically("<=", MaxEventNote))
	g.Expect(utf8.ValidString(note)).To(BeTrue())
	g.Expect(note).To(HaveSuffix("..."))

	g.Expect(Truncate("short", MaxEventNote)).To(Equal("short"))
}
