package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// ScrapeTarget is one endpoint to scrape, with the target labels a
// PodMonitor or ServiceMonitor would give it (namespace, pod...).
type ScrapeTarget struct {
	Job    string
	Addr   string // host:port serving /metrics over HTTP
	Labels map[string]string
}

// Server is a prometheus process that scrapes its targets every second
// and keeps its data in a directory of its own.
type Server struct {
	// URL is the HTTP API's base, http://127.0.0.1:PORT.
	URL  string
	dir  string
	proc *stack.Process
	http *http.Client
}

// Start runs prometheus on a free loopback port with the targets, and
// waits until it is ready. Close stops it and removes its data.
func Start(ctx context.Context, targets []ScrapeTarget) (_ *Server, err error) {
	bin, err := Binary("prometheus")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-prometheus-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, http: &http.Client{Timeout: 10 * time.Second}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	config, err := scrapeConfig(targets)
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return nil, err
	}
	ports, err := freeport.Loopback(1)
	if err != nil {
		return nil, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.URL = "http://" + listen
	cmd := exec.Command(bin, "--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn",
		// Without a console folder of its own, it would read the package's.
		"--web.console.templates="+dir, "--web.console.libraries="+dir)
	if s.proc, err = stack.StartProcess("prometheus", filepath.Join(dir, "prometheus.log"), cmd); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if resp, err := s.http.Get(s.URL + "/-/ready"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.proc.Exited():
			return nil, fmt.Errorf("prometheus exited at start (%w); its log ends with:\n%s", s.proc.ExitErr(), s.proc.LogTail(3000))
		case <-ctx.Done():
			return nil, fmt.Errorf("prometheus not ready within a minute; its log ends with:\n%s", s.proc.LogTail(3000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrapeConfig is a configuration that scrapes every target each second,
// one job per ScrapeTarget.Job, keeping the targets' labels.
func scrapeConfig(targets []ScrapeTarget) ([]byte, error) {
	type static struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	type job struct {
		Name    string   `json:"job_name"`
		Statics []static `json:"static_configs"`
	}
	var jobs []*job
	byName := map[string]*job{}
	for _, t := range targets {
		j := byName[t.Job]
		if j == nil {
			j = &job{Name: t.Job}
			byName[t.Job] = j
			jobs = append(jobs, j)
		}
		j.Statics = append(j.Statics, static{Targets: []string{t.Addr}, Labels: t.Labels})
	}
	return yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"scrape_configs": jobs,
	})
}

// LogPath is prometheus's log.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "prometheus.log") }

// Close stops prometheus (SIGTERM, then SIGKILL) and removes its data.
func (s *Server) Close() {
	if s.proc != nil {
		s.proc.Stop(10 * time.Second)
	}
	_ = os.RemoveAll(s.dir)
}

// Sample is one series of an instant vector.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query evaluates expr now and returns its series; an expression that is
// not an instant vector, or that Prometheus refuses, is an error.
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, not an instant vector", expr, data.ResultType)
	}
	var out []Sample
	return out, json.Unmarshal(data.Result, &out)
}

// LabelValues are the values of label on the series of match, as
// Grafana's label_values(match, label) asks for them.
func (s *Server) LabelValues(ctx context.Context, label, match string) ([]string, error) {
	var out []string
	err := s.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values?match[]="+url.QueryEscape(match), &out)
	return out, err
}

// TargetHealth maps each scraped target's address to "up", "down" or
// "unknown", with the last scrape's error.
func (s *Server) TargetHealth(ctx context.Context) (map[string]string, error) {
	var data struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
			LastError string `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := s.get(ctx, "/api/v1/targets?state=active", &data); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range data.ActiveTargets {
		out[t.ScrapeURL] = strings.TrimSpace(t.Health + " " + t.LastError)
	}
	return out, nil
}

// get calls the HTTP API and decodes its data.
func (s *Server) get(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: HTTP %d: %w", path, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s: %s", body.ErrorType, path, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}
