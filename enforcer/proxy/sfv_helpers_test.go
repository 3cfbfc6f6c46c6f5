package proxy

// appendSFString appends s as a Structured Field String; the enforcer only
// writes names (appendSFName), the tests write other strings too.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendSFChars(b, s)
	return append(b, '"')
}
