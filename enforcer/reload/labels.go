package reload

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// LoadLabels reads a pod's labels from a downward API volume file.
func LoadLabels(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load labels: %w", err)
	}
	labels, err := ParseLabels(data)
	if err != nil {
		return nil, fmt.Errorf("load labels %s: %w", path, err)
	}
	return labels, nil
}

// ParseLabels reads the downward API's labels format: one `key="value"`
// line per label, the value quoted and escaped as Go's %q does (the kubelet
// writes each line with fmt.Sprintf("%s=%q\n", key, value)). Blank lines are
// ignored; anything else that is not such a line is an error, so a damaged
// file cannot silently select other policies.
func ParseLabels(data []byte) (map[string]string, error) {
	labels := map[string]string{}
	for n, line := range bytes.Split(data, []byte("\n")) {
		text := strings.TrimSpace(string(line))
		if text == "" {
			continue
		}
		key, quoted, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want key=\"value\", got %q", n+1, text)
		}
		if errs := config.LabelKeyProblems(key); len(errs) > 0 {
			return nil, fmt.Errorf("line %d: label key %q: %s", n+1, key, strings.Join(errs, "; "))
		}
		if len(quoted) < 2 || quoted[0] != '"' {
			return nil, fmt.Errorf("line %d: value of %q must be double-quoted, got %q", n+1, key, quoted)
		}
		value, err := strconv.Unquote(quoted)
		if err != nil {
			return nil, fmt.Errorf("line %d: value of %q: %q is not a quoted string", n+1, key, quoted)
		}
		if _, dup := labels[key]; dup {
			return nil, fmt.Errorf("line %d: label %q appears twice", n+1, key)
		}
		labels[key] = value
	}
	return labels, nil
}
