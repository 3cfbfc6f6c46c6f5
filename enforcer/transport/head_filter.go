package transport

import "net/http"

// HeadFilter is a ResponseWriter that takes out of the application's
// answer the fields meant for the enforcer, not the client (a cost the
// application reports). It sees the final head as it is written; the heads
// the transport writes itself are handed to FilterHead first: informational
// answers (103 Early Hints), and the 101 of an upgrade, which the reverse
// proxy writes on the hijacked connection.
type HeadFilter interface {
	// FilterHead removes from h, the application's fields of a head of
	// status code about to go to the client, those that are not the
	// client's.
	FilterHead(code int, h http.Header)
}

// headFilter is the HeadFilter w is or wraps, nil when there is none.
func headFilter(w http.ResponseWriter) HeadFilter {
	for {
		if f, ok := w.(HeadFilter); ok {
			return f
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// filterHead hands h, the fields of a head of status code that the
// transport writes to w itself, to w's HeadFilter.
func filterHead(w http.ResponseWriter, code int, h http.Header) {
	if f := headFilter(w); f != nil {
		f.FilterHead(code, h)
	}
}

// upgradeFilterKey holds, in an upgrade's context, the HeadFilter of its
// writer: the reverse proxy shows the 101 to ModifyResponse alone.
type upgradeFilterKey struct{}
