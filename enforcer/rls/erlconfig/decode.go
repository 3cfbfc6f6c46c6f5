// Package erlconfig reads rate limit configuration files in the format of
// envoyproxy/ratelimit (a domain, nested descriptors, rate limits) and
// compiles them into the wire format the enforcer applies
// (enforcer/config), one policy per domain, so that the rate limit service
// decides on the same path as the enforcer.
//
// A file is decoded strictly: an unknown key, a value of the wrong type or
// a key given twice is refused with the file, the field's path and its
// line. Sluice's own settings sit under a `sluice` key: at the top of a
// file for the domain, and in a rate_limit for that limit (file.go).
package erlconfig

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// fieldError is a problem of one field of one file.
type fieldError struct {
	path string
	line int
	msg  string
}

func (e *fieldError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s (line %d): %s", e.path, e.line, e.msg)
	}
	return fmt.Sprintf("%s: %s", e.path, e.msg)
}

// decoder walks a YAML document, collecting every problem with its path.
type decoder struct{ errs []error }

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &fieldError{path: path, line: line, msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

// fields calls each key's handler with its value; a key without one, or
// given twice, is an error. A null value is an empty mapping.
func (d *decoder) fields(path string, n *yaml.Node, handlers map[string]func(path string, v *yaml.Node)) {
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "must be a mapping, got %s", kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		at := join(path, k.Value)
		h, ok := handlers[k.Value]
		switch {
		case !ok:
			d.fail(at, k, "unknown field (one of %s)", strings.Join(sortedKeys(handlers), ", "))
		case seen[k.Value]:
			d.fail(at, k, "given twice")
		default:
			seen[k.Value] = true
			h(at, v)
		}
	}
}

// list calls each for every item of a sequence; null is an empty list.
func (d *decoder) list(path string, n *yaml.Node, each func(path string, i int, v *yaml.Node)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "must be a list, got %s", kindName(n))
		return
	}
	for i, v := range n.Content {
		each(fmt.Sprintf("%s[%d]", path, i), i, v)
	}
}

// scalar decodes a scalar value into out (a string, bool or number).
func (d *decoder) scalar(path string, n *yaml.Node, out any) {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "must be a single value, got %s", kindName(n))
		return
	}
	if _, isString := out.(*string); isString && n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool" {
		d.fail(path, n, "must be a string, got %s", n.Tag)
		return
	}
	if err := n.Decode(out); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  ")
		d.fail(path, n, "%s", strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", n.Line)))
	}
}

func (d *decoder) str(out *string) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) { d.scalar(path, n, out) }
}

func (d *decoder) flag(out *bool) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) { d.scalar(path, n, out) }
}

// child is the value of key in mapping n, for an error to name the line of
// the value it is about; n itself when key is absent.
func child(n *yaml.Node, key string) *yaml.Node {
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
	}
	return n
}

// nth is the i-th item of sequence n; n itself when there is none.
func nth(n *yaml.Node, i int) *yaml.Node {
	if n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
		return n.Content[i]
	}
	return n
}

func isNull(n *yaml.Node) bool { return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("the value %q", n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
