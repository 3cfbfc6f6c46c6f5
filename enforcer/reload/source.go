// Package reload reads the enforcer's configuration from its files (the
// compiled config, or RateLimitPolicy YAML, and the pod's labels), watches
// them, and applies each valid change atomically while keeping the last
// good configuration when a change is invalid.
package reload

import (
	"errors"
	"fmt"
	"maps"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// CompileFunc compiles RateLimitPolicy objects of one namespace (defaults
// already applied) into the enforcer configuration.
type CompileFunc func(namespace string, policies []v1alpha1.RateLimitPolicy) (*config.Config, error)

// Source says where the configuration comes from: exactly one of
// ConfigPath (the compiled JSON the operator writes) or PolicyPaths
// (RateLimitPolicy YAML, compiled in-process with Compile), and optionally
// the pod's labels.
type Source struct {
	ConfigPath  string
	PolicyPaths []string
	Compile     CompileFunc
	// Namespace is the namespace of policies whose metadata names none.
	Namespace string
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
	return other != nil && l.Config.Hash() == other.Config.Hash() &&
		(l.Labels == nil) == (other.Labels == nil) && maps.Equal(l.Labels, other.Labels)
}

// Validate reports a Source that names no or both kinds of configuration.
func (s *Source) Validate() error {
	switch {
	case s.ConfigPath == "" && len(s.PolicyPaths) == 0:
		return errors.New("one of --config or --policy-file is required")
	case s.ConfigPath != "" && len(s.PolicyPaths) > 0:
		return errors.New("--config and --policy-file cannot be used together")
	case len(s.PolicyPaths) > 0 && s.Compile == nil:
		return errors.New("--policy-file is not supported by this build: no policy compiler")
	}
	return nil
}

// Paths are the files the Source reads, for watching.
func (s *Source) Paths() []string {
	paths := append([]string(nil), s.PolicyPaths...)
	if s.ConfigPath != "" {
		paths = append(paths, s.ConfigPath)
	}
	if s.LabelsPath != "" {
		paths = append(paths, s.LabelsPath)
	}
	return paths
}

// Load reads, compiles where needed, and validates every file of s.
func (s *Source) Load() (*Loaded, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var l Loaded
	var err error
	if s.ConfigPath != "" {
		l.Config, err = config.Load(s.ConfigPath)
	} else {
		l.Config, err = s.loadPolicies()
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

func (s *Source) loadPolicies() (*config.Config, error) {
	namespace, policies, err := LoadPolicies(s.Namespace, s.PolicyPaths...)
	if err != nil {
		return nil, err
	}
	c, err := s.Compile(namespace, policies)
	if err != nil {
		return nil, fmt.Errorf("compile policies: %w", err)
	}
	// The compiler's output is the same contract as the operator's
	// ConfigMap: hold it to the same validation.
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("compiled policies: %w", err)
	}
	return c, nil
}
