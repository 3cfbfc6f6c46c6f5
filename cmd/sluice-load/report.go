package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// report is a run's result, printed as text or, with --json, as one JSON
// object for scripts. Latencies are in microseconds.
type report struct {
	Target      string            `json:"target"`
	Mode        string            `json:"mode"` // "closed" (max throughput) or "open" (fixed rate)
	Concurrency int               `json:"concurrency"`
	TargetRate  float64           `json:"targetRate,omitempty"`
	Seconds     float64           `json:"seconds"`
	Requests    uint64            `json:"requests"` // answered requests in the measured period
	Errors      uint64            `json:"errors"`   // requests without an HTTP answer
	RPS         float64           `json:"rps"`
	Late        uint64            `json:"late,omitempty"` // open model: started over 1ms late, no free connection
	Status      statusClasses     `json:"status"`
	Codes       map[string]uint64 `json:"codes"`
	LatencyUS   latencySummary    `json:"latencyUs"`
	LastError   string            `json:"lastError,omitempty"`
}

type statusClasses struct {
	OK              uint64 `json:"2xx"`
	TooManyRequests uint64 `json:"429"`
	Unavailable     uint64 `json:"503"`
	Other           uint64 `json:"other"`
}

type latencySummary struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

func newReport(t *target, p plan, o *outcome) *report { return buildReport(t.url, p, o) }

// buildReport is the report of a run against the target named url.
func buildReport(url string, p plan, o *outcome) *report {
	r := &report{
		Target:      url,
		Mode:        "closed",
		Concurrency: p.Concurrency,
		Errors:      o.errors,
		Codes:       map[string]uint64{},
		Requests:    o.latency.Count(),
	}
	if p.Rate > 0 {
		r.Mode, r.TargetRate, r.Late = "open", p.Rate, o.late
	}
	elapsed := o.elapsed(p.Duration)
	r.Seconds = round(elapsed.Seconds(), 3)
	r.RPS = round(float64(r.Requests)/elapsed.Seconds(), 1)
	for code, n := range o.codes {
		if n == 0 {
			continue
		}
		switch {
		case code >= 200 && code < 300:
			r.Status.OK += n
		case code == 429:
			r.Status.TooManyRequests += n
		case code == 503:
			r.Status.Unavailable += n
		default:
			r.Status.Other += n
		}
		key := strconv.Itoa(code)
		if code == 0 {
			key = "invalid"
		}
		r.Codes[key] = n
	}
	h := &o.latency
	r.LatencyUS = latencySummary{
		Min: micros(h.Min()), Mean: micros(h.Mean()),
		P50: micros(h.Quantile(0.50)), P90: micros(h.Quantile(0.90)),
		P99: micros(h.Quantile(0.99)), P999: micros(h.Quantile(0.999)),
		Max: micros(h.Max()),
	}
	if o.lastErr != nil {
		r.LastError = o.lastErr.Error()
	}
	return r
}

func micros(d time.Duration) float64 { return round(float64(d)/float64(time.Microsecond), 1) }

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(r)
}

func (r *report) writeText(w io.Writer) error {
	load := fmt.Sprintf("closed loop, %d connections", r.Concurrency)
	if r.Mode == "open" {
		load = fmt.Sprintf("open model at %.0f requests/s, up to %d connections", r.TargetRate, r.Concurrency)
	}
	l := r.LatencyUS
	_, err := fmt.Fprintf(w, `target     %s (%s)
requests   %d in %.2fs = %.0f requests/s, %d errors
status     2xx %d  429 %d  503 %d  other %d
latency    p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s)
`, r.Target, load, r.Requests, r.Seconds, r.RPS, r.Errors,
		r.Status.OK, r.Status.TooManyRequests, r.Status.Unavailable, r.Status.Other,
		us(l.P50), us(l.P90), us(l.P99), us(l.P999), us(l.Max), us(l.Mean))
	if err != nil {
		return err
	}
	if r.Late > 0 {
		if _, err := fmt.Fprintf(w, "late       %d requests started over %s after their due time (no free connection, or no CPU for this process)\n", r.Late, lateAfter); err != nil {
			return err
		}
	}
	if r.LastError != "" {
		_, err = fmt.Fprintf(w, "last error %s\n", r.LastError)
	}
	return err
}

// us formats microseconds for people: 312µs, 1.25ms.
func us(v float64) string {
	if v < 1000 {
		return fmt.Sprintf("%.0fµs", v)
	}
	return fmt.Sprintf("%.2fms", v/1000)
}
