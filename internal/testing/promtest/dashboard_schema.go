package promtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// registerPlugins gives the SDK the schemas of Grafana's panel types and
// data sources, which it needs to decode panels' options and queries.
var registerPlugins = sync.OnceFunc(plugins.RegisterDefaultPlugins)

// SchemaProblems checks the dashboard JSON against the Grafana Foundation
// SDK's dashboard types, which are generated from Grafana's own schema: an
// unknown field, a value of the wrong type, or a required field left out is
// a problem named by its path ("panels[3].gridPos.w: ..."). Where the SDK
// decodes leniently, it checks too: a panel's fieldConfig (the SDK is strict
// only about its custom part), a panel type without a schema (its options
// would go unchecked), and a query of a data source type the SDK does not
// know (it would be kept as a bag of fields).
func SchemaProblems(data []byte) []string {
	registerPlugins()
	var out []string
	add := func(prefix string, err error) {
		var errs cog.BuildErrors
		switch {
		case errors.As(err, &errs):
			for _, e := range errs {
				out = append(out, prefix+e.Error())
			}
		case err != nil:
			out = append(out, prefix+err.Error())
		}
	}
	// The chart ships a classic dashboard (schemaVersion 39), the format
	// Grafana imports from a ConfigMap; dashboardv2 is the new resource
	// format, which this JSON is not.
	var d dashboard.Dashboard //nolint:staticcheck // the classic format's schema, deprecated only in favour of v2
	add("", d.UnmarshalJSONStrict(data))
	if len(out) == 0 {
		add("", d.Validate())
	}

	// The SDK's lenient spots, panel by panel in the JSON: the decoded
	// dashboard leaves out the panels it refused, so its indices shift.
	var raw struct {
		Panels []struct {
			Type        string            `json:"type"`
			Datasource  *Datasource       `json:"datasource"`
			FieldConfig json.RawMessage   `json:"fieldConfig"`
			Targets     []json.RawMessage `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return append(out, err.Error())
	}
	for i, p := range raw.Panels {
		if p.Type == "row" {
			continue
		}
		if _, ok := cog.ConfigForPanelcfgVariant(p.Type); !ok {
			out = append(out, fmt.Sprintf("panels[%d].type: Grafana has no schema for panel type %q", i, p.Type))
		}
		if p.FieldConfig != nil {
			add(fmt.Sprintf("panels[%d].fieldConfig.", i), new(dashboard.FieldConfigSource).UnmarshalJSONStrict(p.FieldConfig))
		}
		hint := ""
		if p.Datasource != nil {
			hint = p.Datasource.Type
		}
		for j, t := range p.Targets {
			if q, err := cog.StrictUnmarshalDataquery(t, hint); err == nil {
				if _, ok := q.(variants.UnknownDataquery); ok {
					out = append(out, fmt.Sprintf("panels[%d].targets[%d]: no data source type to check the query against: set datasource.type on the panel or the query", i, j))
				}
			}
		}
	}
	return out
}
