package reload

import (
	"errors"
	"fmt"
	"maps"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Outcome is what became of a pushed configuration.
type Outcome string

const (
	// Applied: the push was put into service.
	Applied Outcome = "Applied"
	// Unchanged: the enforcer serves this revision already, with these labels.
	Unchanged Outcome = "Unchanged"
	// Older: the enforcer serves a newer revision, which stays.
	Older Outcome = "Older"
)

// Pushed is a configuration the manager sends to the admin listener: the
// document its ConfigMap holds, and the pod's labels as the manager sees
// them (nil: the labels file's), which reach the enforcer before the
// kubelet refreshes the downward API file.
type Pushed struct {
	Document []byte
	Labels   map[string]string
}

// Offer puts a pushed configuration into service if it is newer than the
// one in service, or brings other labels at the same revision. A document
// that does not load, or has no revision (a push cannot be ordered
// against the file without one), is refused with an error and the
// configuration in service stays; so does a push in a Source that reads
// no compiled configuration file (--policy-file), which a push would
// silently override.
func (r *Reloader) Offer(p Pushed) (Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.source.ConfigPath == "" {
		return "", errors.New("this enforcer reads its policies from files (--policy-file), not from the manager: a push is refused")
	}
	c, err := config.Parse(p.Document)
	if err == nil && c.Revision == 0 {
		err = errors.New("the pushed configuration has no revision")
	}
	if err == nil && r.current != nil && c.Namespace != r.current.Config.Namespace {
		err = fmt.Errorf("the pushed configuration is namespace %s's, this enforcer serves namespace %s", c.Namespace, r.current.Config.Namespace)
	}
	var labels map[string]string
	keep := func() {}
	if err == nil {
		labels, keep, err = r.pushLabels(p.Labels)
	}
	if err != nil {
		err = fmt.Errorf("pushed config: %w", err)
		r.failed(err)
		r.log.Error("pushed config refused; keeping the config in service", "error", err, "hash", r.state.Hash)
		return "", err
	}
	l := &Loaded{Config: c, Labels: labels}
	if r.current != nil {
		switch {
		case c.Revision < r.current.Config.Revision,
			c.Revision == r.current.Config.Revision && c.Hash() != r.current.Config.Hash():
			return Older, nil
		case l.Same(r.current):
			keep()
			return Unchanged, nil
		}
	}
	if err := r.apply(l); err != nil {
		err = fmt.Errorf("apply pushed config: %w", err)
		r.failed(err)
		r.log.Error("pushed config failed; keeping the last good config", "error", err, "hash", r.state.Hash)
		return "", err
	}
	if r.current != nil {
		r.state.Reloads++
	}
	keep()
	r.state.Pushes++
	r.serve(l)
	return Applied, nil
}

// pushLabels are the labels a push puts into service: the pushed ones
// when the Source has a labels file (without one every policy applies,
// and stays so), else those in force. keep remembers pushed ones until
// the labels file changes (newest), once the push is in service.
func (r *Reloader) pushLabels(pushed map[string]string) (labels map[string]string, keep func(), err error) {
	keep = func() {}
	if r.source.LabelsPath == "" {
		return nil, keep, nil
	}
	file, err := LoadLabels(r.source.LabelsPath)
	switch {
	case pushed != nil:
		pushed = maps.Clone(pushed)
		return pushed, func() { r.pushed, r.fileAtPush = pushed, file }, nil
	case err == nil && r.pushed != nil && maps.Equal(file, r.fileAtPush):
		return r.pushed, keep, nil
	case err == nil:
		return file, keep, nil
	case r.current != nil:
		return r.current.Labels, keep, nil
	}
	return nil, keep, err
}
