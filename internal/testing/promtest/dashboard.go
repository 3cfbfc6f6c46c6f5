package promtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Dashboard is the chart's Grafana dashboard (files/dashboards/sluice.json),
// as much of it as the tests read.
type Dashboard struct {
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is one panel of the dashboard; rows have no targets.
type Panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *Datasource     `json:"datasource"`
	GridPos    *GridPos        `json:"gridPos"`
	Targets    []Target        `json:"targets"`
	Panels     json.RawMessage `json:"panels"` // a collapsed row's panels
}

// Datasource names the data source a panel or a target queries.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// GridPos is where a panel sits.
type GridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Target is one query of a panel.
type Target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *Datasource `json:"datasource"`
}

// Variable is one template variable.
type Variable struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Definition string      `json:"definition"`
	Datasource *Datasource `json:"datasource"`
}

// ReadDashboardJSON reads the chart's dashboard under root as it ships.
func ReadDashboardJSON(root string) ([]byte, error) {
	return os.ReadFile(filepath.Join(root, "charts", "sluice", "files", "dashboards", "sluice.json"))
}

// ReadDashboard reads the chart's dashboard under root.
func ReadDashboard(root string) (*Dashboard, error) {
	data, err := ReadDashboardJSON(root)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("read the dashboard: %w", err)
	}
	return &d, nil
}

// variableRef is a reference to a variable: $name, ${name} or ${name:format}.
var variableRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|\$([A-Za-z0-9_]+)`)

// builtins are the variables Grafana itself defines.
var builtins = map[string]bool{
	"__rate_interval": true, "__interval": true, "__interval_ms": true, "__range": true,
	"__range_s": true, "__range_ms": true, "__from": true, "__to": true, "__dashboard": true,
}

// References are the variables s refers to.
func References(s string) []string {
	var out []string
	for _, m := range variableRef.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// Problems lists what makes the dashboard unfit to import and read: a
// panel without a data source, a query without an expression or refId,
// ids that repeat, a panel without its place on the grid, a reference to
// a variable the dashboard does not define.
func (d *Dashboard) Problems() []string {
	var out []string
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		if v.Name == "" || defined[v.Name] {
			out = append(out, fmt.Sprintf("variable %q is unnamed or defined twice", v.Name))
		}
		defined[v.Name] = true
	}
	undefined := func(where, s string) {
		for _, name := range References(s) {
			if !defined[name] && !builtins[name] {
				out = append(out, fmt.Sprintf("%s refers to $%s, which the dashboard does not define", where, name))
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			if v.Datasource == nil || v.Definition == "" {
				out = append(out, fmt.Sprintf("variable %s has no data source or no query", v.Name))
			} else {
				undefined("variable "+v.Name, v.Datasource.UID+" "+v.Definition)
			}
		}
	}
	ids := map[int]string{}
	for _, p := range d.Panels {
		where := fmt.Sprintf("panel %d (%s)", p.ID, p.Title)
		if p.ID == 0 {
			out = append(out, where+" has no id")
		} else if other, ok := ids[p.ID]; ok {
			out = append(out, fmt.Sprintf("%s has the id of panel %q", where, other))
		}
		ids[p.ID] = p.Title
		if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			out = append(out, where+" has no gridPos within the 24 columns")
		}
		if p.Type == "row" {
			if len(p.Panels) > 0 && string(p.Panels) != "[]" {
				out = append(out, where+" is a collapsed row: its panels are not checked")
			}
			continue
		}
		if p.Datasource == nil || p.Datasource.UID == "" {
			out = append(out, where+" has no datasource")
		} else {
			undefined(where+"'s datasource", p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			out = append(out, where+" has no targets")
		}
		refs := map[string]bool{}
		for i, t := range p.Targets {
			twhere := fmt.Sprintf("%s target %d", where, i)
			if strings.TrimSpace(t.Expr) == "" {
				out = append(out, twhere+" has no expr")
			}
			if t.RefID == "" || refs[t.RefID] {
				out = append(out, twhere+" has no refId or repeats one")
			}
			refs[t.RefID] = true
			if t.Datasource != nil {
				undefined(twhere+"'s datasource", t.Datasource.UID)
			}
			undefined(twhere, t.Expr)
		}
	}
	return out
}

// Query is one panel query, ready for Prometheus.
type Query struct {
	Panel  string // "3 Deny ratio"
	RefID  string
	Expr   string // as the dashboard holds it
	PromQL string // with the variables replaced
}

// Queries are the panels' queries with each variable replaced by vars
// (name without $, to value) as Grafana would before asking Prometheus.
// A variable without a value is an error.
func (d *Dashboard) Queries(vars map[string]string) ([]Query, error) {
	var out []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			q := Query{Panel: fmt.Sprintf("%d %s", p.ID, p.Title), RefID: t.RefID, Expr: t.Expr}
			var missing []string
			q.PromQL = variableRef.ReplaceAllStringFunc(t.Expr, func(ref string) string {
				name := References(ref)[0]
				v, ok := vars[name]
				if !ok {
					missing = append(missing, name)
				}
				return v
			})
			if len(missing) > 0 {
				sort.Strings(missing)
				return nil, fmt.Errorf("panel %s refers to %v, which have no value", q.Panel, missing)
			}
			out = append(out, q)
		}
	}
	return out, nil
}

// metricName is a Sluice metric in PromQL.
var metricName = regexp.MustCompile(`\bsluice_[a-z0-9_]+`)

// Metrics are the Sluice metric names (series names, histograms' _bucket
// included) that a PromQL expression reads.
func Metrics(expr string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range metricName.FindAllString(expr, -1) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}
