// Package reload reads the enforcer's configuration from its files (the
// compiled config, or others through a LoadFunc, and the pod's labels), watches
// them, and applies each valid change atomically while keeping the last
// good configuration when a change is invalid.
package reload

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// LoadFunc reads and validates the configuration from the files of a
// Source. cmd/enforcer gives one that compiles RateLimitPolicy YAML
// (--policy-file), so that this package knows nothing of the API.
type LoadFunc func() (*config.Config, error)

// Source says where the configuration comes from: exactly one of
// ConfigPath (the compiled JSON the operator writes) or Load (any other
// way, reading Files), and optionally the pod's labels.
type Source struct {
	ConfigPath string
	// Load reads the configuration from Files, which are watched.
	Load  LoadFunc
	Files []string
	// Dirs are folders Load reads whole: any change of their entries is
	// a change.
	Dirs []string
	// LabelsPath is a downward API labels file; empty means the pod has no
	// known labels and every policy applies.
	LabelsPath string
}

// Loaded is one reading of a Source.
type Loaded struct {
	// Config is every policy read, before selection by labels: its Hash is
	// what the operator compares with the config it wrote.
	Config *config.Config
	// Labels are the pod's labels; nil when the Source has no labels file.
	Labels map[string]string
}

// ForPod is the configuration this pod applies: the policies selecting its
// labels, or every policy when the labels are unknown.
func (l *Loaded) ForPod() *config.Config {
	if l.Labels == nil {
		return l.Config
	}
	return l.Config.ForPod(l.Labels)
}

// Same reports whether l and other would configure the enforcer alike.
func (l *Loaded) Same(other *Loaded) bool {
	return other != nil && l.Config.Hash() == other.Config.Hash() && l.Config.Revision == other.Config.Revision &&
		(l.Labels == nil) == (other.Labels == nil) && maps.Equal(l.Labels, other.Labels)
}

// Validate reports a Source that names no or both kinds of configuration.
func (s *Source) Validate() error {
	switch {
	case s.ConfigPath == "" && s.Load == nil:
		return errors.New("no configuration: a Source needs a ConfigPath or a Load function")
	case s.ConfigPath != "" && s.Load != nil:
		return errors.New("a Source takes a ConfigPath or a Load function, not both")
	}
	return nil
}

// Paths are the files the Source reads, for watching.
func (s *Source) Paths() []string {
	paths := append([]string(nil), s.Files...)
	if s.ConfigPath != "" {
		// The compiled configuration is one of the two files (config.Load).
		paths = append(paths, s.ConfigPath, s.ConfigPath+config.CompressedSuffix)
	}
	if s.LabelsPath != "" {
		paths = append(paths, s.LabelsPath)
	}
	return paths
}

// Read reads and validates every file of s.
func (s *Source) Read() (*Loaded, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var l Loaded
	var err error
	if s.ConfigPath != "" {
		l.Config, err = loadRevised(s.ConfigPath)
	} else {
		l.Config, err = s.Load()
	}
	if err != nil {
		return nil, err
	}
	if s.LabelsPath != "" {
		if l.Labels, err = LoadLabels(s.LabelsPath); err != nil {
			return nil, err
		}
	}
	return &l, nil
}

// RevisionFile is the file beside the compiled configuration that holds
// its revision: the key revision of the ConfigMap, mounted with it.
const RevisionFile = "revision"

// loadRevised loads the compiled configuration at path with its revision,
// both from the one version of a ConfigMap volume: the kubelet swaps its
// ..data link to a new directory holding every key at once. Without a
// revision file it is unordered (0).
func loadRevised(path string) (*config.Config, error) {
	dir := filepath.Dir(path)
	if version, err := filepath.EvalSymlinks(filepath.Join(dir, "..data")); err == nil {
		dir = version
	}
	c, err := config.Load(filepath.Join(dir, filepath.Base(path)))
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, RevisionFile))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err == nil {
		c.Revision, err = ParseRevision(strings.TrimSpace(string(data)))
	}
	if err != nil {
		return nil, fmt.Errorf("load config %s: revision: %w", path, err)
	}
	return c, nil
}

// ParseRevision reads a revision: a positive decimal number.
func ParseRevision(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive number", s)
	}
	return n, nil
}
