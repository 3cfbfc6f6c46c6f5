package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// maxPushBytes bounds a pushed configuration, as the enforcer bounds the
// inflated ConfigMap: the body is read whole before it is parsed.
const maxPushBytes = 16 << 20

// ConfigReceiver takes pushed configurations (a *reload.Reloader).
type ConfigReceiver interface {
	Offer(reload.Pushed) (reload.Outcome, error)
}

// authorizePush admits a push only with the write token: a pushed
// configuration can lift every limit, and the application shares the
// pod's network, so no peer address is trusted for it, loopback included.
func (s *Server) authorizePush(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.WriteToken == nil {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "PUT " + status.ConfigPath +
			" takes the write token and this enforcer has no --write-token-file: its configuration comes from its file only"})
		return false
	}
	return s.authorize(w, r, debugapi.Write)
}

// pushConfig answers PUT /config: the body is the document of the
// namespace's ConfigMap, put into service if newer than the one in
// service (reload.Reloader.Offer). An older one is answered 409 with
// what is in service; a bad one 422, and the configuration in service
// stays.
func (s *Server) pushConfig(w http.ResponseWriter, r *http.Request) {
	if !s.authorizePush(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPushBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("a pushed configuration is at most %d bytes", maxPushBytes)})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read the pushed configuration: " + err.Error()})
		return
	}
	revision, err := reload.ParseRevision(r.Header.Get(status.RevisionHeader))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": status.RevisionHeader + ": " + err.Error()})
		return
	}
	pushed := reload.Pushed{Document: body, Revision: revision}
	if h := r.Header.Get(status.LabelsHeader); h != "" {
		if err := json.Unmarshal([]byte(h), &pushed.Labels); err != nil || pushed.Labels == nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": status.LabelsHeader + " is not a JSON object of labels"})
			return
		}
	}
	outcome, err := s.opts.Delivery.Offer(pushed)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
		return
	}
	doc := s.Status()
	s.addActiveBans(r.Context(), &doc)
	code := http.StatusOK
	if outcome == reload.Older {
		code = http.StatusConflict
	}
	writeJSON(w, code, status.PushAnswer{Outcome: string(outcome), Revision: doc.Config.Revision, Status: doc})
}
