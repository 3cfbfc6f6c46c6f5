package status

// ConfigPath is where the enforcer's admin listener takes a pushed
// configuration: PUT, the body the document of the namespace's ConfigMap,
// with the write token.
const ConfigPath = "/config"

// LabelsHeader carries, on a push, the pod's labels as the manager sees
// them, a JSON object: they reach the enforcer before the kubelet
// refreshes its downward API file.
const LabelsHeader = "Sluice-Pod-Labels"

// What became of a pushed configuration, PushAnswer.Outcome.
const (
	// PushApplied: the push is in service.
	PushApplied = "Applied"
	// PushUnchanged: the enforcer served it already.
	PushUnchanged = "Unchanged"
	// PushOlder: the enforcer serves a newer revision, which stays (HTTP
	// 409): the pusher has nothing more to do.
	PushOlder = "Older"
)

// PushAnswer is what a push is answered: its outcome and the enforcer's
// /status document after it, so that the manager's status follows without
// waiting for its next poll.
type PushAnswer struct {
	Outcome string `json:"outcome"`
	// Revision is the revision in service.
	Revision int64    `json:"revision"`
	Status   Document `json:"status"`
}
