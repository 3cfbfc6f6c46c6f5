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

// Package configpush is the client of an enforcer's PUT /config: the
// manager's pusher (controllers/delivery) sends with it, and so can a
// test that stands for a fleet of enforcers.
package configpush

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
)

const (
	// DefaultTimeout bounds one push.
	DefaultTimeout = 2 * time.Second
	// maxAnswerBytes bounds the answer read from an enforcer: its /status
	// document.
	maxAnswerBytes = 1 << 20
)

// ErrRefused marks an enforcer that refused the credential (401, 403):
// its pod predates the write token, or the Secret changed.
var ErrRefused = errors.New("enforcer refused the write token")

// ErrNotServed marks an enforcer without PUT /config (404, 405): a release
// before pushes, which takes its configuration from its file.
var ErrNotServed = errors.New("enforcer takes no pushed configuration")

// Client pushes configurations to enforcers' admin listeners.
type Client struct {
	// HTTP sends the pushes; its Timeout bounds each (nil: a client with
	// DefaultTimeout).
	HTTP *http.Client
}

// Push sends document, the namespace's ConfigMap content, to the admin
// listener at addr (host:port) with token, the write token, and the
// pod's labels (nil: the enforcer keeps its labels file's). An enforcer
// that serves a newer revision answers Older: that is an answer, not an
// error.
func (c *Client) Push(ctx context.Context, addr, token string, document []byte, labels map[string]string) (*statusdoc.PushAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+addr+statusdoc.ConfigPath, bytes.NewReader(document))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if labels != nil {
		encoded, err := json.Marshal(labels)
		if err != nil {
			return nil, err
		}
		req.Header.Set(statusdoc.LabelsHeader, string(encoded))
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusConflict:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%w: %s", ErrRefused, reason(resp))
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("%w: %s", ErrNotServed, reason(resp))
	default:
		return nil, fmt.Errorf("push to %s answered %s", addr, reason(resp))
	}
	var answer statusdoc.PushAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(&answer); err != nil {
		return nil, fmt.Errorf("push to %s: the answer is not a push answer: %w", addr, err)
	}
	return &answer, nil
}

var defaultHTTP = &http.Client{Timeout: DefaultTimeout}

func (c *Client) http() *http.Client {
	if c == nil || c.HTTP == nil {
		return defaultHTTP
	}
	return c.HTTP
}

// reason is the status of a refused push with the enforcer's explanation.
func reason(resp *http.Response) string {
	var body struct {
		Error string `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body) == nil && body.Error != "" {
		return resp.Status + ": " + body.Error
	}
	return resp.Status
}
