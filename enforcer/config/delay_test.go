package config

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestDelayIsValidatedWithItsPath(t *testing.T) {
	delay := func(longest string, queued int) map[string]any {
		return map[string]any{"delay": map[string]any{"max": longest, "maxQueued": queued}}
	}
	for name, c := range map[string]struct {
		algorithm string
		onLimit   map[string]any
		want      string
	}{
		"sliding window": {"SlidingWindowLog", delay("500ms", 10),
			"rules[1](api).onLimit.delay: SlidingWindowLog cannot book future capacity exactly: only TokenBucket, GCRA and Concurrency rules delay"},
		"fixed window":  {"FixedWindow", delay("500ms", 10), "FixedWindow cannot book future capacity exactly"},
		"max too long":  {"TokenBucket", delay("31s", 10), "rules[1](api).onLimit.delay.max: must be a whole number of microseconds between 1ms and 30s, got 31s"},
		"max too short": {"GCRA", delay("10us", 10), "onLimit.delay.max: must be a whole number of microseconds between 1ms and 30s"},
		"no queue":      {"TokenBucket", delay("500ms", 0), "rules[1](api).onLimit.delay.maxQueued: must be between 1 and 100000, got 0"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			doc := exampleDoc(t)
			rule(doc, 1)["algorithm"] = c.algorithm
			rule(doc, 1)["onLimit"] = c.onLimit
			_, err := Parse(marshal(t, doc))
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}

	t.Run("exempt", func(t *testing.T) {
		g := NewWithT(t)
		doc := exampleDoc(t)
		rule(doc, 0)["onLimit"] = delay("500ms", 10)
		_, err := Parse(marshal(t, doc))
		g.Expect(err).To(MatchError(ContainSubstring("rules[0](health).onLimit.delay: an exempt rule never limits")))
	})

	t.Run("accepted", func(t *testing.T) {
		g := NewWithT(t)
		doc := exampleDoc(t)
		rule(doc, 1)["algorithm"] = "GCRA"
		rule(doc, 1)["onLimit"] = delay("500ms", 10)
		c, err := Parse(marshal(t, doc))
		g.Expect(err).NotTo(HaveOccurred())
		r := &c.Policies[0].Rules[1]
		g.Expect(r.DelayMax()).To(Equal(500 * time.Millisecond))
		g.Expect(r.OnLimit.Delay.MaxQueued).To(BeEquivalentTo(10))
		g.Expect(c.Policies[0].Rules[2].DelayMax()).To(BeZero(), "a rule without onLimit refuses at once")
	})
}
