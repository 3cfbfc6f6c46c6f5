package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// scenario is traffic of one kind of client, spread over the replicas of
// an application like a Service spreads it.
type scenario struct {
	name     string
	app      string
	method   string
	path     string
	host     string
	headers  map[string]string
	requests int
}

// tally counts the answers of a scenario by status, and keeps the first
// answer of each status for display.
type tally struct {
	scenario scenario
	byStatus map[int]int
	first    map[int]*answer
}

type answer struct {
	pod    string
	status string
	header http.Header
	body   string
}

func (t *tally) allowed() int { return t.byStatus[http.StatusOK] }
func (t *tally) denied() int  { return t.byStatus[http.StatusTooManyRequests] }
func (t *tally) other() string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(t.byStatus)) {
		if code != http.StatusOK && code != http.StatusTooManyRequests {
			parts = append(parts, fmt.Sprintf("%d×%d", t.byStatus[code], code))
		}
	}
	return strings.Join(parts, " ")
}

var httpClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4},
}

// run sends the scenario's requests, alternating between endpoints.
func (sc scenario) run(ctx context.Context, endpoints []stack.Endpoint) (*tally, error) {
	t := &tally{scenario: sc, byStatus: map[int]int{}, first: map[int]*answer{}}
	for i := range sc.requests {
		ep := endpoints[i%len(endpoints)]
		a, code, err := send(ctx, ep, sc.method, sc.path, sc.host, sc.headers)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
		t.byStatus[code]++
		if t.first[code] == nil {
			t.first[code] = a
		}
	}
	return t, nil
}

func send(ctx context.Context, ep stack.Endpoint, method, path, host string, headers map[string]string) (*answer, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, ep.HTTP+path, nil)
	if err != nil {
		return nil, 0, err
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return &answer{pod: ep.Pod, status: resp.Proto + " " + resp.Status, header: resp.Header, body: strings.TrimSpace(string(body))}, resp.StatusCode, nil
}
