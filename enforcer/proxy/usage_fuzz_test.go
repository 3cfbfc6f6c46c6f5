package proxy

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/engine"
)

// referenceUsage is what encoding/json finds in a whole answer: the
// top-level usage object, or why there is none.
func referenceUsage(b []byte) (map[string]json.RawMessage, string) {
	if !json.Valid(b) {
		return nil, engine.ReportMalformed
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return nil, engine.ReportMissing // not an object
	}
	raw, ok := top["usage"]
	if !ok || string(raw) == "null" {
		return nil, engine.ReportMissing
	}
	var usage map[string]json.RawMessage
	if json.Unmarshal(raw, &usage) != nil {
		return nil, engine.ReportMalformed
	}
	return usage, ""
}

var lineBreak = regexp.MustCompile("\r\n|\r|\n")

// FuzzUsageReader holds the streaming reader to encoding/json: fed in
// pieces of any size, a plain answer and the same JSON as one event of a
// stream give the usage that json.Unmarshal finds in the whole, or the
// same reason for none.
func FuzzUsageReader(f *testing.F) {
	for _, seed := range []string{
		`{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
		`{"usage":{"total_tokens":1},"usage":null}`,
		`{"us\u0061ge":{"total_tokens":-1.5e3,"x":[true,false,null,{"y":"\"}"}]}}`,
		`[{"usage":{}}]`,
		`{"usage":null, "usage" :{"a":1}}`,
		`{"content":"usage\":null","\u0075sage":{"a":2}}`,
		`{"choices":[{"usage":{"a":1}}],"usage":{"b":0.25E-2}} `,
		`{"usage":{"a":01}}`,
		`{"usage":{"a":"\ud83d\ude00"}}` + "\n",
		string(chatAnswer(600, 9)),
	} {
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, body []byte, piece uint8) {
		g := NewWithT(t)
		n := int(piece%64) + 1
		want, reason := referenceUsage(body)
		u := feed(newUsageReader(jsonType, nil), body, n)
		g.Expect(u.found.reason).To(Equal(reason), "%q", body)
		if reason == "" {
			g.Expect(u.found.usage).To(Equal(want), "%q", body)
		}

		// the same text as one event, a data line per line
		var event bytes.Buffer
		for _, line := range lineBreak.Split(string(body), -1) {
			event.WriteString("data: " + line + "\n")
		}
		event.WriteString("\n")
		joined := []byte(lineBreak.ReplaceAllString(string(body), "\n"))
		want, reason = referenceUsage(joined)
		u = feed(newUsageReader(streamType, nil), event.Bytes(), n)
		if reason == "" {
			g.Expect(u.found.reason).To(BeEmpty(), "%q", event.Bytes())
			g.Expect(u.found.usage).To(Equal(want), "%q", event.Bytes())
		} else {
			_, got := u.units("any")
			g.Expect(got).NotTo(BeEmpty(), "%q", event.Bytes())
		}
	})
}
