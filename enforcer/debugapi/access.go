package debugapi

// Access is what a caller asks of the admin listener.
type Access int

const (
	// Read is /status, GET /bans and /debug/tenant: they reveal usage and
	// change nothing.
	Read Access = iota
	// Write is DELETE /tenant and DELETE /bans: they reset counters and
	// lift bans, which lifts a limit.
	Write
)
